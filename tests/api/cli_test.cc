// Runs the built `torus validate` binary: exit codes and the `FILE: path: message` lines.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/api/corpus.h"

namespace torus::api {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

// The arguments are paths from this repository and the temp dir: no shell metacharacters.
Result run_torus(const std::string& args) {
  const std::string command = std::string(TORUS_BINARY_DIR) + "/bin/torus " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) r.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(TorusValidate, ValidFilesExitZeroSilently) {
  std::string args = "validate";
  for (const auto& f : testing::corpus()) {
    if (f.valid) args += " " + f.path.string();
  }
  for (const auto& p : testing::yaml_files(testing::source_dir() / "examples")) args += " " + p.string();
  const Result r = run_torus(args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
}

TEST(TorusValidate, EachInvalidFileExitsOneWithItsErrorLines) {
  for (const auto& f : testing::corpus()) {
    if (f.valid) continue;
    SCOPED_TRACE(f.path.string());
    const Result r = run_torus("validate " + f.path.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    const auto lines = lines_of(r.out);
    ASSERT_FALSE(lines.empty());
    for (const auto& line : lines) EXPECT_EQ(line.rfind(f.path.string() + ": ", 0), 0u) << line;
    for (const auto& path : f.expected_paths) {
      const std::string prefix = f.path.string() + ": " + path + ": ";
      EXPECT_TRUE(
          std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }))
          << "no line starting with " << prefix << "\n"
          << r.out;
    }
  }
}

TEST(TorusValidate, MixedFilesExitOneAndMalformedYamlGivesLineAndColumn) {
  const auto dir = std::filesystem::temp_directory_path() / ("torus-cli-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto malformed = dir / "malformed.yaml";
  std::ofstream(malformed) << "spec:\n  gang:\n    workers: [1, 2\n  model: {}\n";
  const std::string valid = (testing::source_dir() / "examples/fashion-mnist.yaml").string();
  const Result r = run_torus("validate " + valid + " " + malformed.string());
  EXPECT_EQ(r.exit_code, 1);
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0].rfind(malformed.string() + ":", 0), 0u) << lines[0];
  // FILE:LINE:COLUMN: malformed YAML: ...
  std::istringstream rest(lines[0].substr(malformed.string().size() + 1));
  int line = 0, column = 0;
  char colon = 0;
  rest >> line >> colon >> column;
  EXPECT_GE(line, 3) << lines[0];
  EXPECT_GT(column, 0) << lines[0];
  EXPECT_NE(lines[0].find("malformed YAML"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(TorusValidate, UsageAndHelp) {
  EXPECT_EQ(run_torus("validate").exit_code, 2);
  EXPECT_EQ(run_torus("validate --bogus x.yaml").exit_code, 2);
  EXPECT_EQ(run_torus("frobnicate").exit_code, 2);
  const Result help = run_torus("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("validate"), std::string::npos);
  const Result sub = run_torus("validate --help");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.out.find("usage: torus validate"), std::string::npos);
}

TEST(TorusValidate, PrintDefaultedEmitsAJobThatValidatesAgain) {
  const Result r =
      run_torus("validate --print-defaulted " + (testing::source_dir() / "examples/fashion-mnist.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("imageSize: 28"), std::string::npos) << r.out;
  const auto path =
      std::filesystem::temp_directory_path() / ("torus-defaulted-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << r.out.substr(r.out.find('\n') + 1, r.out.rfind("---") - r.out.find('\n') - 1);
  const Result again = run_torus("validate " + path.string());
  EXPECT_EQ(again.exit_code, 0) << again.out;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace torus::api

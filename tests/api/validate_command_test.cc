// `torus validate` (operator/cli/validate_command.cc), the built binary: exit codes and `FILE: path: message` lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/api/corpus.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace torus::api {
namespace {

using test::TempDir;

// The arguments are paths from this repository and the temp dir: no shell metacharacters.
test::ShellResult run_torus(const std::string& args) {
  return test::run_shell(std::string(TORUS_BINARY_DIR) + "/bin/torus " + args);
}

std::string regex_escape(const std::string& text) {
  static const std::regex kSpecial(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, kSpecial, R"(\$&)");
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
  const test::ShellResult r = run_torus(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

TEST(TorusValidate, EachInvalidFileExitsOneWithItsErrorLines) {
  for (const auto& f : testing::corpus()) {
    if (f.valid) continue;
    SCOPED_TRACE(f.path.string());
    const test::ShellResult r = run_torus("validate " + f.path.string());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const auto lines = lines_of(r.output);
    ASSERT_FALSE(lines.empty());
    // Every error in a YAML file points somewhere: FILE:LINE:COLUMN: path: message.
    const std::regex located("^" + regex_escape(f.path.string()) + ":[0-9]+:[0-9]+: [^ ]+: .+$");
    for (const auto& line : lines) EXPECT_TRUE(std::regex_match(line, located)) << line;
    for (const auto& want : f.expected) {
      const std::string prefix = f.path.string() + ":" + std::to_string(want.line) + ":" + std::to_string(want.column) +
                                 ": " + want.path + ": ";
      EXPECT_TRUE(
          std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }))
          << "no line starting with " << prefix << "\n"
          << r.output;
    }
  }
}

TEST(TorusValidate, MixedFilesExitOneAndMalformedYamlGivesLineAndColumn) {
  const TempDir tmp("torus-cli-test");
  const auto malformed = tmp.path() / "malformed.yaml";
  std::ofstream(malformed) << "spec:\n  gang:\n    workers: [1, 2\n  model: {}\n";
  const std::string valid = (testing::source_dir() / "examples/fashion-mnist.yaml").string();
  const test::ShellResult r = run_torus("validate " + valid + " " + malformed.string());
  EXPECT_EQ(r.exit_code, 1);
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_EQ(lines[0].rfind(malformed.string() + ":", 0), 0u) << lines[0];
  // FILE:LINE:COLUMN: malformed YAML: ...
  std::istringstream rest(lines[0].substr(malformed.string().size() + 1));
  int line = 0, column = 0;
  char colon = 0;
  rest >> line >> colon >> column;
  EXPECT_GE(line, 3) << lines[0];
  EXPECT_GT(column, 0) << lines[0];
  EXPECT_NE(lines[0].find("malformed YAML"), std::string::npos);
}

TEST(TorusValidate, PrintsFileLineColumnForEveryKindOfError) {
  const TempDir dir;
  const std::string file = dir.write("bad.yaml",
                                     "apiVersion: torus.dev/v1alpha1\n"  // 1
                                     "kind: TrainingJob\n"               // 2
                                     "metadata:\n"                       // 3
                                     "  name: bad\n"                     // 4
                                     "spec:\n"                           // 5
                                     "  gang:\n"                         // 6
                                     "    processesPerWorker: 1\n"       // 7  (workers missing: points at gang)
                                     "  model:\n"                        // 8
                                     "    arch: resnet9\n"               // 9
                                     "    widthz: [8, 16]\n"             // 10 unknown field
                                     "  data: {dataset: synthetic}\n"    // 11
                                     "  training:\n"                     // 12
                                     "    epochs: \"4\"\n"               // 13 wrong type
                                     "    batchSize: -4\n"               // 14 semantic
                                     "    lrSchedule: {peak: 0.1}\n"     // 15
                                     "    phases:\n"                     // 16
                                     "      - fromEpoch: 0\n"            // 17
                                     "        toEpoch: 4\n"              // 18
                                     "        imageSize: 4\n");          // 19 a field in a list element
  const test::ShellResult r = run_torus("validate " + file);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(lines_of(r.output),
            (std::vector<std::string>{
                file + ":10:5: spec.model.widthz: unknown field",
                file + ":13:5: spec.training.epochs: must be an integer, got a string \"4\"",
                file + ":6:3: spec.gang.workers: is required: the number of worker pods",
                file + ":14:5: spec.training.batchSize: must be a positive integer, got -4",
                file + ":19:9: spec.training.phases[0].imageSize: must be an integer in [8, 1024], got 4",
            }))
      << r.output;
}

TEST(TorusValidate, JsonHasNoPositionsOnlyPaths) {
  const TempDir dir;
  const std::string file =
      dir.write("bad.json",
                R"({"apiVersion": "torus.dev/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "bad"},
          "spec": {"gang": {"workers": 2}, "model": {"arch": "resnet9"}, "data": {"dataset": "synthetic"},
                   "training": {"epochs": 1, "batchSize": -4, "batchSze": 1, "lrSchedule": {"peak": 0.1}}}})");
  const test::ShellResult r = run_torus("validate " + file);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(lines_of(r.output), (std::vector<std::string>{
                                    file + ": spec.training.batchSze: unknown field",
                                    file + ": spec.training.batchSize: must be a positive integer, got -4",
                                }))
      << r.output;
}

TEST(TorusValidate, UsageAndHelp) {
  EXPECT_EQ(run_torus("validate").exit_code, 2);
  EXPECT_EQ(run_torus("validate --bogus x.yaml").exit_code, 2);
  EXPECT_EQ(run_torus("frobnicate").exit_code, 2);
  const test::ShellResult help = run_torus("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("validate"), std::string::npos);
  const test::ShellResult sub = run_torus("validate --help");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.output.find("usage: torus validate"), std::string::npos);
}

TEST(TorusValidate, PrintDefaultedEmitsAJobThatValidatesAgain) {
  const test::ShellResult r =
      run_torus("validate --print-defaulted " + (testing::source_dir() / "examples/fashion-mnist.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("imageSize: 28"), std::string::npos) << r.output;
  const TempDir tmp("torus-defaulted");
  const auto path = tmp.path() / "defaulted.yaml";
  std::ofstream(path) << r.output.substr(r.output.find('\n') + 1, r.output.rfind("---") - r.output.find('\n') - 1);
  const test::ShellResult again = run_torus("validate " + path.string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

}  // namespace
}  // namespace torus::api

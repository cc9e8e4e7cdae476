// Every benchmark's smoke (bench/common.sh): each script under bench/ and bench/gpu/ that runs on its own (a #! line;
// the sourced helpers, peer.sh, cpu_isa.sh, ..., run inside them) runs with SMOKE=1, for seconds, and must end with
// a well-formed RESULT line, so that a change that breaks a benchmark turns the suite red instead of rotting unseen.
// The scripts are listed when the tests are (a new one gets its smoke without a word here). One that exits 3 has no
// device to run on ("no CUDA device"): skipped, with its own words.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace torus::test {
namespace {

namespace fs = std::filesystem;

// The words a RESULT value may be besides a number or a version: a side that did not run (a smoke's peer, the
// secondary figure when it is off), no peer, the vector ISA both sides ran.
const std::set<std::string> kKnownWords = {"skipped", "none", "avx2", "avx512"};

bool is_number(const std::string& v) {
  static const std::regex number(R"(-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
  return std::regex_match(v, number);
}

// 2.6.3 (oneDNN), torch-1.13.0a0 (the peer).
bool is_version(const std::string& v) {
  static const std::regex version(R"((torch-)?\d+(\.\d+)+[a-z0-9]*)");
  return std::regex_match(v, version);
}

// What is wrong with a benchmark's last line, empty when nothing: `RESULT`, then `key=value` pairs with
// lower_snake_case keys (1proc_resnet9 too), each once, each value a number, a version or a known word; the first key's value (the
// headline) a number, or "skipped" when the peer it is measured against did not run.
std::vector<std::string> result_line_problems(const std::string& line) {
  std::istringstream in(line);
  std::string word;
  if (!(in >> word) || word != "RESULT") return {"the last line does not start with RESULT: '" + line + "'"};
  static const std::regex pair(R"(([a-z0-9][a-z0-9_]*)=(.*))");
  std::vector<std::string> problems;
  std::set<std::string> keys;
  bool headline = true;
  if (!(in >> std::ws) || in.eof()) return {"RESULT without a figure"};
  while (in >> word) {
    std::smatch m;
    if (!std::regex_match(word, m, pair)) {
      problems.push_back("'" + word + "' is not key=value with a lower_snake_case key");
      continue;
    }
    const std::string key = m[1], value = m[2];
    if (!keys.insert(key).second) problems.push_back(key + ": given twice");
    const bool ok = headline ? is_number(value) || value == "skipped"
                             : is_number(value) || is_version(value) || kKnownWords.count(value) > 0;
    if (!ok) {
      problems.push_back(key + "=" + value + ": expected " +
                         (headline ? "a number (the headline)" : "a number, a version or one of skipped/none/avx2/avx512"));
    }
    headline = false;
  }
  return problems;
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

std::string tail(const std::string& text, size_t chars) {
  return text.size() <= chars ? text : "..." + text.substr(text.size() - chars);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ResultLine, AWellFormedLineHasNoProblems) {
  EXPECT_TRUE(result_line_problems("RESULT allreduce_busbw_ratio_vs_torch_gloo=7.48 torus_busbw_gbps=12.33 "
                                   "bytes=67108864 peer=torch-1.13.0a0")
                  .empty());
  EXPECT_TRUE(result_line_problems("RESULT goodput_overhead_fraction=1.2e-04 isa=avx2 torus_onednn=2.6.3 ").empty());
  EXPECT_TRUE(result_line_problems("RESULT data_loader_ratio_vs_pytorch=skipped pytorch_img_per_s=skipped peer=none")
                  .empty());
}

TEST(ResultLine, WhatABrokenBenchmarkPrintsIsNamed) {
  // A figure its grep never found, a word no one expects, a key twice, a headline that is no number, no RESULT.
  const auto empty = result_line_problems("RESULT operator_jobs_per_second=12 p99_seconds=");
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0], "p99_seconds=: expected a number, a version or one of skipped/none/avx2/avx512");
  EXPECT_EQ(result_line_problems("RESULT ratio=1 phase=Failed").size(), 1u);
  EXPECT_EQ(result_line_problems("RESULT ratio=1 ratio=2").at(0), "ratio: given twice");
  EXPECT_EQ(result_line_problems("RESULT ratio=nan").size(), 1u);
  EXPECT_EQ(result_line_problems("RESULT Ratio=1").size(), 1u);
  EXPECT_EQ(result_line_problems("RESULT").at(0), "RESULT without a figure");
  EXPECT_EQ(result_line_problems("torus run failed (log above)").size(), 1u);
}

// Scripts that run on their own, relative to the source root: bench/*.sh and bench/gpu/*.sh with a #! line.
std::vector<std::string> benchmark_scripts() {
  std::vector<std::string> scripts;
  const fs::path root(TORUS_SOURCE_DIR);
  for (const char* folder : {"bench", "bench/gpu"}) {
    for (const auto& entry : fs::directory_iterator(root / folder)) {
      if (entry.path().extension() != ".sh") continue;
      if (read_file(entry.path().string()).rfind("#!", 0) != 0) continue;
      scripts.push_back(fs::relative(entry.path(), root).string());
    }
  }
  std::sort(scripts.begin(), scripts.end());
  return scripts;
}

class BenchSmoke : public ::testing::TestWithParam<std::string> {};

// A smoke that hangs ends here, named, instead of at ctest's timeout.
constexpr int kSmokeTimeoutSeconds = 240;

TEST_P(BenchSmoke, EndsWithAWellFormedResultLine) {
  const std::string script = GetParam();
  TempDir dir("bench-smoke");
  const std::string err = dir.file("stderr");
  const ShellResult r = run_shell("cd " + std::string(TORUS_SOURCE_DIR) + " && SMOKE=1 BUILD_DIR=" +
                                  std::string(TORUS_BINARY_DIR) + " timeout -k 10 " +
                                  std::to_string(kSmokeTimeoutSeconds) + " bash " + script + " 2>" + err);
  const std::string errors = read_file(err);
  std::printf("%s\n%s\n", r.output.c_str(), tail(errors, 4000).c_str());
  if (r.exit_code == 3) GTEST_SKIP() << script << ": " << last_line(errors);
  ASSERT_NE(r.exit_code, 124) << script << " ran past " << kSmokeTimeoutSeconds << " s";
  ASSERT_EQ(r.exit_code, 0) << script << " failed: " << last_line(errors);
  const std::string result = last_line(r.output);
  for (const std::string& problem : result_line_problems(result)) ADD_FAILURE() << script << ": " << problem;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).replace_extension().string().substr(std::string("bench/").size());
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryBenchmark, BenchSmoke, ::testing::ValuesIn(benchmark_scripts()), test_name);

}  // namespace
}  // namespace torus::test

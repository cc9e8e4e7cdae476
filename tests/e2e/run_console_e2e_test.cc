// The console of `torus run` end to end (issue 31, item 5): real `torus` and `torus-worker` processes on a tiny
// synthetic job (2 ranks, 2 epochs of 100 steps, a few seconds): the epoch rows, the rank log files whose paths the
// console prints, and a rank killed on purpose named with its signal and the last lines of its log.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"
#include "tests/support/torus_cli.h"

namespace torus {
namespace {

namespace fs = std::filesystem;
using test::run_torus;
using test::RunOutput;

constexpr int kEpochs = 2;
constexpr int kKillAfterStep = 130;  // in epoch 2, after the checkpoint of epoch 1 (step 100)

fs::path write_job(const fs::path& dir) {
  const fs::path file = dir / "console.yaml";
  std::ofstream(file) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: console}\nspec:\n"
                         "  gang: {workers: 2, threadsPerProcess: 1}\n"
                         "  model: {arch: resnet9, widths: [8, 16, 32, 64]}\n"
                         "  data:\n"
                         "    dataset: synthetic\n"
                         "    imageSize: 28\n"
                         "    loaderThreads: 1\n"
                         "    synthetic: {trainImages: 6400, validationImages: 64, numClasses: 4}\n"
                         "  training:\n"
                         "    epochs: "
                      << kEpochs
                      << "\n"
                         "    batchSize: 64\n"
                         "    lrSchedule: {peak: 0.1}\n"
                         "    checkpoint: {dir: "
                      << (dir / "ckpt").string()
                      << ", everyEpochs: 1}\n"
                         "  runPolicy: {restartPolicy: ExitCode}\n";
  return file;
}

std::string read(const fs::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

// The epochs that have a row under the table's header: "    1      1.3184    0.2917   79.69%      3537     0.5s".
// Every figure is there: the workers report each epoch's train loss and images/s with its evaluation.
std::set<int> epoch_rows(const RunOutput& out) {
  static const std::regex kRow(R"(^ +([0-9]+) +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9]+ +[0-9.hms]+$)");
  std::set<int> epochs;
  bool header = false;
  for (const auto& l : out.lines) {
    header = header || l == "epoch  train loss  val loss  val acc  images/s     time";
    std::smatch m;
    if (header && std::regex_match(l, m, kRow)) epochs.insert(std::stoi(m[1]));
  }
  return epochs;
}

// The path the console printed after `prefix` on a line of its own, up to the next space.
std::string printed_path(const RunOutput& out, const std::string& prefix) {
  for (const auto& l : out.lines)
    if (l.rfind(prefix, 0) == 0) return l.substr(prefix.size(), l.find(' ', prefix.size()) - prefix.size());
  return "";
}

// A rank's log holds its own lines (the worker tags each with its rank), nobody else's, and no event lines.
void expect_log_of_rank(const fs::path& log, int rank) {
  const std::string text = read(log);
  EXPECT_NE(text.find("[rank " + std::to_string(rank) + "] worker/"), std::string::npos) << log << ":\n" << text;
  EXPECT_EQ(text.find("[rank " + std::to_string(1 - rank) + "] worker/"), std::string::npos) << log << ":\n" << text;
  EXPECT_EQ(text.find("@torus-event"), std::string::npos) << log;
}

TEST(RunConsoleE2E, AKilledRankIsNamedWithItsSignalAndLastLinesAndEveryEpochHasARow) {
  const test::TempDir tmp("run-console-e2e-kill");
  const RunOutput out = run_torus({"run", write_job(tmp.path()).string(), "--log-dir", (tmp.path() / "logs").string()},
                                  std::chrono::seconds(180), nullptr,
                                  {{"TORUS_TEST_SIGKILL_AT_STEP", "1:" + std::to_string(kKillAfterStep)}});
  ASSERT_EQ(out.exit_code, 0) << out.text();
  ASSERT_EQ(out.field("restarts"), "1") << out.text();
  EXPECT_EQ(epoch_rows(out), (std::set<int>{1, 2})) << out.text();

  // By default the console names rank 0's log; the others lie beside it.
  const fs::path rank0 = printed_path(out, "logs: ");
  ASSERT_EQ(rank0, tmp.path() / "logs" / "rank-0.log") << out.text();
  const fs::path rank1 = rank0.parent_path() / "rank-1.log";
  expect_log_of_rank(rank0, 0);
  expect_log_of_rank(rank1, 1);
  EXPECT_NE(read(rank1).find("---- torus run: attempt 1 ----"), std::string::npos) << "the restart is marked";

  // The failure: rank 1, its signal, where its log is, then its last lines, the last being its own word that it
  // raises SIGKILL at that step.
  const std::string header = "rank 1 killed by SIGKILL (signal 9); the last ";
  size_t at = 0;
  while (at < out.lines.size() && out.lines[at].rfind(header, 0) != 0) ++at;
  ASSERT_LT(at, out.lines.size()) << out.text();
  EXPECT_NE(out.lines[at].find(" lines of its log, " + rank1.string() + ":"), std::string::npos) << out.lines[at];
  std::string tail;
  for (size_t i = at + 1; i < out.lines.size() && out.lines[i].rfind("[rank 1] ", 0) == 0; ++i) tail = out.lines[i];
  EXPECT_NE(tail.find("TORUS_TEST_SIGKILL_AT_STEP: rank 1 raises SIGKILL after step " + std::to_string(kKillAfterStep)),
            std::string::npos)
      << "the tail ends with the rank's last line:\n"
      << out.text();
}

TEST(RunConsoleE2E, VerboseListsEveryRanksLogFile) {
  const test::TempDir tmp("run-console-e2e-verbose");
  const RunOutput out =
      run_torus({"run", write_job(tmp.path()).string(), "--set", "spec.training.epochs=1", "--verbose"},
                std::chrono::seconds(180));
  ASSERT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(epoch_rows(out), (std::set<int>{1})) << out.text();
  for (int rank : {0, 1}) {
    const fs::path log = printed_path(out, "rank " + std::to_string(rank) + " log: ");
    ASSERT_FALSE(log.empty()) << out.text();
    EXPECT_EQ(log.filename(), "rank-" + std::to_string(rank) + ".log");
    expect_log_of_rank(log, rank);
  }
  // The default folder is the run's own, under the temp directory: remove it with the test's.
  fs::remove_all(fs::path(printed_path(out, "rank 0 log: ")).parent_path());
}

}  // namespace
}  // namespace torus

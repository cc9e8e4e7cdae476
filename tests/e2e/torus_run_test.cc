// `torus run` end to end: real worker processes, rendezvous, all-reduce, checkpoints, gang restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/process/supervisor.h"
#include "tests/support/temp_dir.h"
#include "tests/support/torus_cli.h"

namespace torus {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::string kExample = std::string(TORUS_SOURCE_DIR) + "/examples/fashion-mnist.yaml";

using test::run_torus;
using test::RunOutput;
using test::worker_pid;

std::vector<std::string> one_epoch_args(int workers, const fs::path& ckpt) {
  return {"run",       kExample,
          "--workers", std::to_string(workers),
          "--set",     "spec.training.epochs=1",
          "--set",     "spec.training.targetAccuracy=0.99",
          "--set",     "spec.training.checkpoint.dir=" + ckpt.string()};
}

TEST(TorusRun, InvalidFileStartsNothingAndNamesTheField) {
  const test::TempDir tmp("torus-e2e-invalid");
  const fs::path& dir = tmp.path();
  const fs::path bad = dir / "bad.yaml";
  std::ofstream(bad) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad}\n"
                        "spec:\n  training: {epochs: 0, batchSze: 3}\n";
  auto out = run_torus({"run", bad.string()}, seconds(60));
  EXPECT_EQ(out.exit_code, 1) << out.text();
  // FILE:line:column of the field's key, as `torus validate` prints it.
  EXPECT_NE(out.text().find(bad.string() + ":5:25: spec.training.batchSze: unknown field"), std::string::npos)
      << out.text();
  EXPECT_NE(out.text().find(bad.string() + ":5:14: spec.training.epochs: must be an integer in [1, 10000], got 0"),
            std::string::npos)
      << out.text();
  EXPECT_EQ(out.text().find("torus run: job"), std::string::npos) << "a process was started:\n" << out.text();

  // A value given with --set has no line: the flag is its source.
  out = run_torus({"run", kExample, "--set", "spec.training.epochs=0", "--set", "spec.training.lrSchedule={peak: -1}"},
                  seconds(60));
  EXPECT_EQ(out.exit_code, 1) << out.text();
  EXPECT_NE(out.text().find("--set spec.training.epochs: spec.training.epochs: must be an integer in [1, 10000], "
                            "got 0"),
            std::string::npos)
      << out.text();
  EXPECT_NE(out.text().find("--set spec.training.lrSchedule: spec.training.lrSchedule.peak: must be a number in (0, "
                            "inf), got -1"),
            std::string::npos)
      << out.text();
  EXPECT_EQ(out.text().find("torus run: job"), std::string::npos) << "a process was started:\n" << out.text();
}

TEST(TorusRun, AlwaysFailingWorkerExhaustsTheBackoffLimit) {
  const test::TempDir tmp("torus-e2e-backoff");
  const fs::path& dir = tmp.path();
  auto out = run_torus({"run", kExample, "--set", "spec.data.path=" + (dir / "no-such-data").string(), "--set",
                        "spec.runPolicy.restartPolicy=OnFailure", "--set", "spec.runPolicy.backoffLimit=1", "--set",
                        "spec.training.checkpoint.dir=" + (dir / "ckpt").string()},
                       seconds(300));
  EXPECT_NE(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("phase"), "Failed") << out.text();
  EXPECT_EQ(out.field("reason"), "BackoffLimitExceeded") << out.text();
  EXPECT_EQ(out.field("restarts"), "1") << out.text();
  EXPECT_NE(out.text().find("no-such-data"), std::string::npos) << "the worker's reason is not shown:\n" << out.text();
}

TEST(TorusRun, OneTwoAndFourWorkersLearnTheSame) {
  std::map<int, double> accuracy;
  for (int workers : {1, 2, 4}) {
    const test::TempDir tmp("torus-e2e-dp" + std::to_string(workers));
    const fs::path& dir = tmp.path();
    auto out = run_torus(one_epoch_args(workers, dir), seconds(600));
    ASSERT_EQ(out.exit_code, 0) << out.text();
    ASSERT_EQ(out.field("phase"), "Succeeded") << out.text();
    accuracy[workers] = std::stod(out.field("accuracy"));
    std::printf("%d worker(s): accuracy %.4f, %s images/s, %s\n", workers, accuracy[workers],
                out.field("images_per_s").c_str(), out.result_line().c_str());
  }
  // Same global batch, same data each epoch: data parallelism must not change what is learned (beyond noise).
  EXPECT_GT(accuracy[1], 0.85);
  EXPECT_NEAR(accuracy[2], accuracy[1], 0.015);
  EXPECT_NEAR(accuracy[4], accuracy[1], 0.015);
}

TEST(TorusRun, SigkilledWorkerIsFollowedByAttemptOneFromTheCheckpoint) {
  const test::TempDir tmp("torus-e2e-kill");
  const fs::path& dir = tmp.path();
  auto args = one_epoch_args(2, dir);
  args.insert(args.end(),
              {"--set", "spec.training.checkpoint.everySteps=40", "--set", "spec.runPolicy.restartPolicy=ExitCode"});
  bool killed = false;
  auto out = run_torus(args, seconds(600), [&](pid_t torus, const std::string& line) {
    if (killed || line.find("checkpoint: ") == std::string::npos) return;
    if (auto pid = worker_pid(torus, 1)) {
      ::kill(*pid, SIGKILL);
      killed = true;
    }
  });
  ASSERT_TRUE(killed) << "no checkpoint was announced, or rank 1 was not found:\n" << out.text();
  EXPECT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("phase"), "Succeeded") << out.text();
  EXPECT_EQ(out.field("restarts"), "1") << out.text();
  std::smatch m;
  const std::string text = out.text();
  // Attempts are 0-based, as the operator's: the first restart is attempt 1.
  EXPECT_NE(text.find("attempt 1: restarting every rank from the last checkpoint"), std::string::npos) << text;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("resumed at step ([0-9]+)"))) << text;
  EXPECT_GE(std::stoi(m[1]), 40) << text;
  EXPECT_GT(std::stod(out.field("accuracy")), 0.8) << text;
}

TEST(TorusRun, CtrlCCheckpointsAndLeavesNothingRunning) {
  const test::TempDir tmp("torus-e2e-interrupt");
  const fs::path& dir = tmp.path();
  auto args = one_epoch_args(2, dir);
  bool sent = false;
  std::vector<pid_t> workers;
  auto out = run_torus(args, seconds(300), [&](pid_t torus, const std::string& line) {
    if (sent || line.find("epoch 1/1") == std::string::npos) return;  // training has started
    for (int r : {0, 1})
      if (auto p = worker_pid(torus, r)) workers.push_back(*p);
    ::kill(torus, SIGINT);
    sent = true;
  });
  ASSERT_TRUE(sent) << out.text();
  EXPECT_EQ(out.exit_code, 130) << out.text();
  EXPECT_EQ(out.field("phase"), "Suspended") << out.text();
  // The ranks agreed on the step to stop after: none was left in a collective with a peer that had gone.
  EXPECT_EQ(out.text().find("watchdog:"), std::string::npos) << out.text();
  EXPECT_NE(out.text().find("stopped on request"), std::string::npos) << out.text();
  for (pid_t p : workers) EXPECT_NE(::kill(p, 0), 0) << "worker " << p << " is still running";
  bool checkpoint_written = false;
  for (const auto& e : fs::recursive_directory_iterator(dir)) checkpoint_written |= e.is_regular_file();
  EXPECT_TRUE(checkpoint_written) << "no checkpoint in " << dir << "\n" << out.text();
}

}  // namespace
}  // namespace torus

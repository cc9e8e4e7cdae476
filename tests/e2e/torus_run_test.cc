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
#include <set>
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

// What each rank of a run did, from the logs `torus run` keeps per rank (rank-N.log in --log-dir).
struct RankLog {
  int steps = -1;          // "finished: E epochs, S steps"
  std::string train_loss;  // "epoch 1/1 done: train loss L": the mean over the rank's own shard
};

std::map<int, RankLog> rank_logs(const fs::path& dir) {
  std::map<int, RankLog> out;
  static const std::regex kName(R"(rank-([0-9]+)\.log)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, kName)) continue;
    RankLog& log = out[std::stoi(m[1])];
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch f;
      if (std::regex_search(line, f, std::regex("finished: [0-9]+ epochs, ([0-9]+) steps"))) log.steps = std::stoi(f[1]);
      if (std::regex_search(line, f, std::regex("epoch 1/1 done: train loss ([0-9.]+)"))) log.train_loss = f[1];
    }
  }
  return out;
}

// spec.gang.workers (--workers): that many ranks ran, each on a shard of its own, in one gang; and the global batch
// split over them learns what one worker learns.
TEST(TorusRun, OneTwoAndFourWorkersLearnTheSame) {
  std::map<int, double> accuracy;
  for (int workers : {1, 2, 4}) {
    const test::TempDir tmp("torus-e2e-dp" + std::to_string(workers));
    const fs::path& dir = tmp.path();
    auto args = one_epoch_args(workers, dir);
    args.insert(args.end(), {"--log-dir", (dir / "logs").string()});
    auto out = run_torus(args, seconds(600));
    ASSERT_EQ(out.exit_code, 0) << out.text();
    ASSERT_EQ(out.field("phase"), "Succeeded") << out.text();
    accuracy[workers] = std::stod(out.field("accuracy"));
    std::printf("%d worker(s): accuracy %.4f, %s images/s, %s\n", workers, accuracy[workers],
                out.field("images_per_s").c_str(), out.result_line().c_str());
    // Exactly `workers` ranks ran: one log each, ranks 0..workers-1, every one to the end of the same steps (one
    // gang: the global batch, not the rank's, sets the steps), each over its own shard (its own mean loss).
    const std::map<int, RankLog> ranks = rank_logs(dir / "logs");
    ASSERT_EQ(static_cast<int>(ranks.size()), workers) << out.text();
    std::set<std::string> losses;
    for (const auto& [rank, log] : ranks) {
      EXPECT_LT(rank, workers);
      EXPECT_EQ(log.steps, ranks.begin()->second.steps) << "rank " << rank;
      EXPECT_GT(log.steps, 0) << "rank " << rank << " did not finish";
      losses.insert(log.train_loss);
    }
    EXPECT_EQ(static_cast<int>(losses.size()), workers) << "the ranks did not train on shards of their own";
  }
  // Same global batch, same data each epoch: data parallelism must not change what is learned (beyond noise).
  EXPECT_GT(accuracy[1], 0.85);
  EXPECT_NEAR(accuracy[2], accuracy[1], 0.015);
  EXPECT_NEAR(accuracy[4], accuracy[1], 0.015);
}

// Run identity: each `torus run` is a new run that trains from step 0, though the example's checkpoint folder holds
// the last run's final checkpoint; --resume starts from the newest checkpoint another run left, and
// spec.training.checkpoint.resumeFrom from a named run's; a checkpoint with nothing left to train says so, with its
// accuracy, instead of accuracy=nan.
TEST(TorusRun, TwoRunsInARowBothTrainFromStepZeroAndResumeContinuesARun) {
  const test::TempDir tmp("torus-e2e-runs");
  const fs::path ckpt = tmp.path() / "ckpt";
  auto example = [&](std::vector<std::string> more) {
    std::vector<std::string> args = one_epoch_args(2, ckpt);
    args.insert(args.end(), {"--set", "spec.training.targetAccuracy=0.8"});
    args.insert(args.end(), more.begin(), more.end());
    return run_torus(args, seconds(600));
  };
  std::vector<RunOutput> firsts;
  for (int i = 0; i < 2; ++i) {
    firsts.push_back(example({}));
    const RunOutput& out = firsts.back();
    ASSERT_EQ(out.exit_code, 0) << out.text();
    EXPECT_EQ(out.field("start_step"), "0") << "run " << i << " did not train from step 0:\n" << out.text();
    EXPECT_GE(std::stod(out.field("accuracy")), 0.8) << out.text();
    EXPECT_NE(out.field("time_to_target_s"), "nan") << out.text();
    EXPECT_NE(std::stod(out.field("images_per_s")), 0) << out.text();
    EXPECT_NE(out.text().find("run " + out.field("run") + " starts from step 0"), std::string::npos) << out.text();
    for (const std::string& line : out.lines)  // the console's prefix and the rank's own log tag: said once
      EXPECT_EQ(line.find("[rank 0]", 1), std::string::npos) << line;
  }
  const std::string first = firsts[0].field("run"), second = firsts[1].field("run");
  ASSERT_NE(first, second);
  EXPECT_NE(firsts[1].text().find(ckpt.string() + " also holds checkpoints of run " + first), std::string::npos)
      << firsts[1].text();
  const std::string steps = firsts[1].field("start_step");
  std::smatch m;
  const std::string second_log = firsts[1].text();
  ASSERT_TRUE(std::regex_search(second_log, m,
                                std::regex("checkpoint: " + ckpt.string() + "/" + second + "/ckpt-([0-9]+)\\.torus")))
      << second_log;
  const std::string epoch_end = m[1];

  // --resume: the newest checkpoint (the second run's), one epoch more.
  const RunOutput resumed =
      example({"--resume", "--set", "spec.training.epochs=2", "--set", "spec.training.targetAccuracy=0.99"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.text();
  EXPECT_EQ(resumed.field("start_step"), epoch_end) << resumed.text();
  EXPECT_EQ(resumed.field("resumed_run"), second) << resumed.text();
  EXPECT_NE(resumed.text().find("resuming at step " + epoch_end + " from " + ckpt.string() + "/" + second + "/ckpt-" +
                                epoch_end + ".torus: run " + second + "'s checkpoint"),
            std::string::npos)
      << resumed.text();
  EXPECT_NE(resumed.text().find("epoch 2/2"), std::string::npos) << "it trained the second epoch:\n" << resumed.text();

  // resumeFrom names the first run, whose one epoch is done: nothing left, said in words and in the RESULT line.
  const RunOutput done = example({"--set", "spec.training.checkpoint.resumeFrom=" + first});
  ASSERT_EQ(done.exit_code, 0) << done.text();
  EXPECT_EQ(done.field("resumed_run"), first) << done.text();
  EXPECT_EQ(done.field("nothing_to_train"), "all_epochs_done") << done.text();
  EXPECT_EQ(done.field("accuracy"), firsts[0].field("accuracy")) << "the first run's final accuracy:\n" << done.text();
  EXPECT_NE(done.text().find("nothing left to train: the checkpoint has finished its training (1 of 1 epochs done"),
            std::string::npos)
      << done.text();
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

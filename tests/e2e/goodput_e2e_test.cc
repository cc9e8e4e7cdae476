// The goodput ledger of `torus run` end to end (issue 31): real `torus` and `torus-worker` processes on a tiny
// synthetic job (2 ranks, a few seconds), one rank killed at a known step after a checkpoint at a known step.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "tests/support/temp_dir.h"
#include "tests/support/torus_cli.h"

namespace torus {
namespace {

namespace fs = std::filesystem;
using test::run_torus;
using test::RunOutput;

constexpr int kCheckpointEvery = 40;
constexpr int kKillAfterStep = 86;  // after the checkpoint of step 80: 6 steps are lost
constexpr int kLostSteps = kKillAfterStep - kKillAfterStep / kCheckpointEvery * kCheckpointEvery;

// 2 ranks of a narrow ResNet-9 on 28x28 synthetic images, 100 steps of ~10 ms; a target every run reaches at its
// only evaluation, so time to target spans the restart.
fs::path write_job(const fs::path& dir, int train_images = 6400) {
  const fs::path file = dir / "goodput.yaml";
  std::ofstream(file) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: goodput}\nspec:\n"
                         "  gang: {workers: 2, threadsPerProcess: 1}\n"
                         "  model: {arch: resnet9, widths: [8, 16, 32, 64]}\n"
                         "  data:\n"
                         "    dataset: synthetic\n"
                         "    imageSize: 28\n"
                         "    loaderThreads: 1\n"
                         "    synthetic: {trainImages: "
                      << train_images
                      << ", validationImages: 64, numClasses: 4}\n"
                         "  training:\n"
                         "    epochs: 1\n"
                         "    batchSize: 64\n"
                         "    targetAccuracy: 0.01\n"
                         "    lrSchedule: {peak: 0.1}\n"
                         "    checkpoint: {dir: "
                      << (dir / "ckpt").string() << ", everySteps: " << kCheckpointEvery
                      << "}\n"
                         "  runPolicy: {restartPolicy: ExitCode}\n";
  return file;
}

double number(const RunOutput& out, const std::string& field) {
  const std::string v = out.field(field);
  EXPECT_FALSE(v.empty()) << "RESULT has no " << field << ":\n" << out.result_line();
  return v.empty() ? -1 : std::stod(v);
}

// The parts and the rest add up to the wall time of the job.
void expect_parts_sum_to_wall(const RunOutput& out) {
  double sum = number(out, "lost_work_s") + number(out, "restart_other_s");
  for (const char* part :
       {"startup_s", "restore_s", "training_s", "data_wait_s", "comm_wait_s", "evaluation_s", "checkpoint_s"}) {
    EXPECT_GE(number(out, part), 0) << part;
    sum += number(out, part);
  }
  EXPECT_NEAR(sum, number(out, "wall_s"), 0.05) << out.result_line();
}

TEST(GoodputE2E, AKilledRankLosesTheStepsSinceTheCheckpointAndTimeToTargetSpansTheRestart) {
  const test::TempDir tmp("goodput-e2e-kill");
  const RunOutput out = run_torus({"run", write_job(tmp.path()).string()}, std::chrono::seconds(180), nullptr,
                                  {{"TORUS_TEST_SIGKILL_AT_STEP", "1:" + std::to_string(kKillAfterStep)}});
  ASSERT_EQ(out.exit_code, 0) << out.text();
  ASSERT_EQ(out.field("restarts"), "1") << out.text();
  // The attempt's own line: the step it reached, the checkpoint it fell back to, the step time then.
  std::smatch m;
  const std::string text = out.text();
  ASSERT_TRUE(std::regex_search(text, m,
                                std::regex("attempt 0 lost ([0-9]+) steps \\(step ([0-9]+) back to the checkpoint of "
                                           "step ([0-9]+)\\) at ([0-9.]+) ms a step")))
      << text;
  EXPECT_EQ(std::stoi(m[3]), kKillAfterStep / kCheckpointEvery * kCheckpointEvery) << m[0];
  EXPECT_NEAR(std::stoi(m[2]), kKillAfterStep, 1) << m[0];
  const double step_s = std::stod(m[4]) / 1000;
  ASSERT_GT(step_s, 0) << m[0];
  // Lost work: within one step time of the truth, (kill step - checkpoint step) x the step time.
  EXPECT_NEAR(number(out, "lost_steps"), kLostSteps, 1) << out.result_line();
  EXPECT_NEAR(number(out, "lost_work_s"), kLostSteps * step_s, step_s) << out.result_line();
  const double goodput = number(out, "goodput");
  EXPECT_GT(goodput, 0) << out.result_line();
  EXPECT_LT(goodput, 1) << out.result_line();
  EXPECT_GT(number(out, "training_s"), 0) << out.result_line();
  EXPECT_GT(number(out, "comm_init_s"), 0) << out.result_line();
  EXPECT_LT(number(out, "comm_init_s"), number(out, "startup_s")) << out.result_line();
  expect_parts_sum_to_wall(out);
  // Time to target counts from the first attempt's first step: attempt 0's steps and the restart are in it.
  EXPECT_GT(number(out, "time_to_target_s"), number(out, "attempt_time_to_target_s") + kKillAfterStep * step_s * 0.5)
      << out.result_line();
}

TEST(GoodputE2E, AnUninterruptedJobLosesNothing) {
  const test::TempDir tmp("goodput-e2e-clean");
  const RunOutput out = run_torus({"run", write_job(tmp.path()).string()}, std::chrono::seconds(180));
  ASSERT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("restarts"), "0") << out.result_line();
  EXPECT_EQ(out.field("lost_steps"), "0") << out.result_line();
  EXPECT_EQ(number(out, "lost_work_s"), 0) << out.result_line();
  EXPECT_GT(number(out, "goodput"), 0) << out.result_line();
  expect_parts_sum_to_wall(out);
  EXPECT_NE(out.text().find("goodput "), std::string::npos) << "the summary shows the ledger:\n" << out.text();
}

// Rank 1 is throttled from outside (stopped 10 ms of every 20 while it trains): its own work per step takes about
// twice its peer's, and `torus run` names it while the job keeps training.
TEST(GoodputE2E, AThrottledRankIsNamedAsTheStraggler) {
  const test::TempDir tmp("goodput-e2e-straggler");
  std::atomic<pid_t> slow{0};
  std::atomic<bool> done{false};
  std::thread throttle([&] {
    while (!done) {
      const pid_t pid = slow.load();
      if (pid == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polls for the rank to exist
        continue;
      }
      ::kill(pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the throttle itself is a duty cycle
      ::kill(pid, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const RunOutput out = run_torus({"run", write_job(tmp.path(), 19200).string()}, std::chrono::seconds(180),
                                  [&](pid_t torus, const std::string& line) {
                                    if (slow.load() != 0 || line.find("effective configuration") == std::string::npos)
                                      return;
                                    if (auto pid = test::worker_pid(torus, 1)) slow.store(*pid);
                                  });
  done = true;
  throttle.join();
  if (slow.load() != 0) ::kill(slow.load(), SIGCONT);
  ASSERT_NE(slow.load(), 0) << out.text();
  ASSERT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("straggler_rank"), "1") << out.text();
  EXPECT_GT(number(out, "straggler_slowdown"), 1.25) << out.result_line();
  // Named while it trained (a window closed), not only in the summary.
  EXPECT_NE(out.text().find("straggler: rank 1 arrives at the all-reduce after"), std::string::npos) << out.text();
}

}  // namespace
}  // namespace torus

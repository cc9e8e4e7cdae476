#include "operator/runtime/run_report.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace torus::runtime {
namespace {

TEST(RunReport, ProgressLineFromRankZeroEvents) {
  RunReport r;
  r.on_attempt_start(0);
  r.on_event(0, process::ProgressEvent{.epoch = 2,
                                       .epochs = 4,
                                       .step = 312,
                                       .steps_total = 940,
                                       .loss = 0.4123,
                                       .images_per_s = 1987.4,
                                       .eta_s = 62.0});
  // other ranks do not speak for the gang
  r.on_event(1, process::ProgressEvent{.rank = 1, .epoch = 9, .loss = 9.0});
  r.on_event(0, process::EvaluatedEvent{.epoch = 2, .accuracy = 0.912});
  EXPECT_EQ(r.progress_line(),
            "epoch 2/4 |██████▋             |  33% · step 312/940 · loss 0.412 · acc 91.20% · 1987 img/s · ETA 1m02s");
  EXPECT_EQ(r.progress_line(BarStyle::kAscii),
            "epoch 2/4 [######              ]  33% · step 312/940 · loss 0.412 · acc 91.20% · 1987 img/s · ETA 1m02s");
}

TEST(RunReport, SummaryEndsWithMachineReadableResult) {
  RunReport r;
  const auto t0 = LedgerClock::now();
  auto at = [t0](double s) {
    return t0 + std::chrono::duration_cast<LedgerClock::duration>(std::chrono::duration<double>(s));
  };
  r.on_attempt_start(0, at(0));
  r.on_event(0, process::StartedEvent{.world_size = 2, .metrics_port = 9401, .target_accuracy = 0.92}, at(2));
  r.on_event(1, process::StartedEvent{.rank = 1, .world_size = 2, .metrics_port = 9402}, at(2));
  r.on_attempt_start(1, at(20));
  r.on_event(0, process::EvaluatedEvent{.accuracy = 0.925, .time_to_target_s = 101.26}, at(130));
  r.on_event(0, process::FinishedEvent{.images_per_s = 2210.0, .busbw_gbps = 3.5, .accuracy = 0.931}, at(131));
  GangOutcome out{api::Phase::kSucceeded, controller::Reason::kNone, "", 2};
  auto lines = r.summary(out, 132, at(132));
  ASSERT_FALSE(lines.empty());
  // Time to target runs from the first attempt's first training step (rank 0 started) across the restart; the last
  // attempt's own figure is named so.
  EXPECT_EQ(lines.back().substr(0, lines.back().find(" goodput=")),
            "RESULT phase=Succeeded accuracy=0.9310 time_to_target_s=128.0 attempt_time_to_target_s=101.3 "
            "images_per_s=2210 busbw_gbps=3.500 restarts=1");
  bool said = false;
  for (const auto& l : lines)
    said |= l ==
            "time to 92.0%: 128.0 s from the first training step, across 2 attempts "
            "(the last attempt's own: 101.3 s)";
  EXPECT_TRUE(said) << lines.front();
  EXPECT_EQ(r.metrics_ports(), (std::vector<int>{9401, 9402}));
}

TEST(RunReport, SummaryNamesTheAlgorithmThatRanAndItsBytesPerCall) {
  RunReport r;
  r.on_attempt_start(0);
  r.on_event(0, process::FinishedEvent{
                    .busbw_gbps = 1.25, .allreduce_algorithm = "ring", .allreduce_calls = 8, .allreduce_bytes = 8000});
  const auto lines = r.summary(GangOutcome{api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 10);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "all-reduce: ring, 8 calls, 1000 bytes per call"), lines.end());
  EXPECT_NE(lines.back().find(" allreduce_algorithm=ring allreduce_bytes_per_call=1000"), std::string::npos)
      << lines.back();
}

TEST(RunReport, FailureCarriesTheReason) {
  RunReport r;
  GangOutcome out{api::Phase::kFailed, controller::Reason::kBackoffLimitExceeded, "backoff limit 1 reached", 2};
  auto lines = r.summary(out, 3);
  EXPECT_EQ(lines.front(), "phase: Failed (backoff limit 1 reached)");
  EXPECT_NE(lines.back().find("phase=Failed"), std::string::npos);
  EXPECT_NE(lines.back().find("accuracy=nan"), std::string::npos);
  EXPECT_NE(lines.back().find("reason=BackoffLimitExceeded"), std::string::npos);
}

// Where the run started, and a run that trained nothing, in words and in the RESULT line.
TEST(RunReport, SummarySaysWhereTheRunStartedAndWhenNothingWasLeftToTrain) {
  RunReport r;
  r.on_attempt_start(0);
  r.on_event(0, process::StartedEvent{.run = "new-run",
                                      .resumed_step = 234,
                                      .resumed_from = {"ResumeFrom", "old-run", "/ckpt/old-run/ckpt-234.torus"},
                                      .left_to_train = "all epochs done"});
  r.on_event(0, process::FinishedEvent{.accuracy = 0.8912, .left_to_train = "all epochs done"});
  const auto lines = r.summary(GangOutcome{api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 2);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "start: run new-run resumed at step 234 from run old-run's checkpoint "
                      "/ckpt/old-run/ckpt-234.torus (spec.training.checkpoint.resumeFrom)"),
            lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "nothing left to train: all epochs done (see rank 0's log above)"),
            lines.end());
  EXPECT_NE(lines.back().find("accuracy=0.8912"), std::string::npos) << "the checkpoint's, not nan: " << lines.back();
  EXPECT_NE(lines.back().find(" run=new-run start_step=234 resumed_run=old-run nothing_to_train=all_epochs_done"),
            std::string::npos)
      << lines.back();

  RunReport fresh;
  fresh.on_attempt_start(0);
  fresh.on_event(0, process::StartedEvent{.run = "r2"});
  const auto fresh_lines = fresh.summary(GangOutcome{api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 2);
  EXPECT_NE(std::find(fresh_lines.begin(), fresh_lines.end(), "start: run r2 trained from step 0 (a new run)"),
            fresh_lines.end());
  EXPECT_NE(fresh_lines.back().find(" run=r2 start_step=0"), std::string::npos) << fresh_lines.back();
  EXPECT_EQ(fresh_lines.back().find("nothing_to_train"), std::string::npos) << fresh_lines.back();
}

TEST(FormatDuration, Units) {
  EXPECT_EQ(format_duration(12.4), "12s");
  EXPECT_EQ(format_duration(245), "4m05s");
  EXPECT_EQ(format_duration(3723), "1h02m03s");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace torus::runtime

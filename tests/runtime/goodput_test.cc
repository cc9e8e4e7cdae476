// The job's goodput ledger from worker events and the launcher's clock (made-up times: every figure is exact).
#include "operator/runtime/goodput.h"

#include <gtest/gtest.h>

#include "common/process/worker_events.h"
#include "operator/runtime/run_report.h"

namespace torus::runtime {
namespace {

using process::TimePart;

process::StartedEvent started(int64_t resumed_step, const process::RankLedger& ledger = {}) {
  return {.resumed_step = resumed_step, .ledger = ledger};
}
process::ProgressEvent progress(int64_t step, const process::RankLedger& ledger = {}) {
  return {.step = step, .ledger = ledger};
}
process::CheckpointEvent checkpoint(int64_t step, const process::RankLedger& ledger) {
  return {.step = step, .ledger = ledger};
}
process::FinishedEvent finished(const process::RankLedger& ledger) { return {.ledger = ledger}; }
process::EvaluatedEvent evaluated(double accuracy, std::optional<double> time_to_target_s = std::nullopt) {
  return {.accuracy = accuracy, .time_to_target_s = time_to_target_s};
}

class GoodputLedgerTest : public ::testing::Test {
 protected:
  LedgerClock::time_point at(double s) const {
    return t0_ + std::chrono::duration_cast<LedgerClock::duration>(std::chrono::duration<double>(s));
  }
  static process::RankLedger ledger(double startup, double comm_init, double restore, double training, double data,
                                    double comm, double eval, double ckpt, int64_t steps, double step_s) {
    process::RankLedger l;
    l[TimePart::kStartup] = startup;
    l[TimePart::kRestore] = restore;
    l[TimePart::kTraining] = training;
    l[TimePart::kDataWait] = data;
    l[TimePart::kCommWait] = comm;
    l[TimePart::kEvaluation] = eval;
    l[TimePart::kCheckpoint] = ckpt;
    l.comm_init_s = comm_init;
    l.steps = steps;
    l.step_seconds = step_s;
    return l;
  }
  LedgerClock::time_point t0_ = LedgerClock::now();
};

// Attempt 0 checkpoints at step 40 (t = 5 s), is last heard at step 60 (t = 6 s, 0.05 s a step) and loses a rank at
// t = 6.5 s: 60 + 10 - 40 = 30 steps (1.5 s) are lost; attempt 1 resumes from step 40 and finishes.
TEST_F(GoodputLedgerTest, AFailedAttemptKeepsItsCheckpointedPartsAndLosesTheRest) {
  GoodputLedger g;
  g.on_attempt_start(0, at(0));
  g.on_event(0, started(0, ledger(0.8, 0.3, 0, 0, 0, 0, 0, 0, 0, 0)), at(1));
  g.on_event(0, checkpoint(40, ledger(0.8, 0.3, 0, 1.5, 0.1, 0.4, 0, 0.1, 40, 2.0)), at(5));
  g.on_event(1, progress(60), at(6));
  g.on_event(0, progress(60, ledger(0.8, 0.3, 0, 2.2, 0.2, 0.6, 0, 0.1, 60, 3.0)), at(6));
  g.on_failure(at(6.5));
  g.on_failure(at(7));                                            // the other ranks' exits change nothing
  g.on_event(0, progress(90), at(6.6));                           // nor what a dying gang still reports
  g.on_attempt_start(1, at(7));
  g.on_event(0, started(40, ledger(0.9, 0.2, 0.05, 0, 0, 0, 0, 0, 0, 0)), at(8));
  g.on_event(0, finished(ledger(0.9, 0.2, 0.05, 10, 0.5, 1, 0.4, 0.1, 100, 11.5)), at(20));
  const JobGoodput t = g.totals(at(20.5));
  EXPECT_DOUBLE_EQ(t.wall_s, 20.5);
  EXPECT_EQ(t.lost_steps, 30);
  EXPECT_NEAR(t.lost_work_s, 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(t.kept[TimePart::kTraining], 11.5);  // attempt 0 up to its checkpoint, attempt 1 whole
  EXPECT_DOUBLE_EQ(t.kept[TimePart::kCommWait], 1.4);
  EXPECT_DOUBLE_EQ(t.kept[TimePart::kStartup], 1.7);
  EXPECT_DOUBLE_EQ(t.kept[TimePart::kRestore], 0.05);
  EXPECT_DOUBLE_EQ(t.kept[TimePart::kEvaluation], 0.4);
  EXPECT_DOUBLE_EQ(t.kept.comm_init_s, 0.5);
  EXPECT_DOUBLE_EQ(t.step_s, 11.5 / 100);  // the last attempt's (its ledger before had no steps: its mean)
  EXPECT_NEAR(t.restart_and_other_s, 20.5 - 15.85 - 1.5, 1e-9);
  EXPECT_NEAR(t.ratio(), 11.5 / 20.5, 1e-12);
}

// A surviving rank's last words ("aborted", from its watchdog) say exactly which step the gang had finished.
TEST_F(GoodputLedgerTest, ASurvivorsLastWordsGiveTheLostStepsExactly) {
  GoodputLedger g;
  g.on_attempt_start(0, at(0));
  g.on_event(0, started(0), at(1));
  g.on_event(0, checkpoint(40, ledger(0.8, 0.3, 0, 1.5, 0.1, 0.4, 0, 0.1, 40, 2.0)), at(5));
  g.on_event(0, progress(60, ledger(0.8, 0.3, 0, 2.2, 0.2, 0.6, 0, 0.1, 60, 3.0)), at(6));
  g.on_failure(at(6.5));  // the extrapolation would say 70
  g.on_event(0, process::AbortedEvent{.rank = 0, .step = 63}, at(6.6));
  const JobGoodput t = g.totals(at(7));
  EXPECT_EQ(t.lost_steps, 23);
  ASSERT_EQ(t.losses.size(), 1u);
  EXPECT_EQ(t.losses[0].reached_step, 63);
  EXPECT_EQ(t.losses[0].saved_step, 40);
  EXPECT_NEAR(t.lost_work_s, 23 * 0.05, 1e-9);
}

TEST_F(GoodputLedgerTest, AFailureBeforeTrainingLosesNoWorkAndTimeToTargetSpansTheRestart) {
  GoodputLedger g;
  g.on_attempt_start(0, at(0));
  g.on_failure(at(3));  // a rank died in start-up: nothing had trained
  g.on_attempt_start(1, at(4));
  g.on_event(0, started(0), at(5));
  g.on_event(0, evaluated(0.5), at(9));
  EXPECT_FALSE(g.time_to_target_s());
  g.on_event(0, evaluated(0.95, 7.0), at(12));
  g.on_event(0, evaluated(0.96, 7.0), at(13));
  ASSERT_TRUE(g.time_to_target_s());
  EXPECT_DOUBLE_EQ(*g.time_to_target_s(), 7.0);  // from the first training step, attempt 1's started event
  const JobGoodput t = g.totals(at(14));
  EXPECT_DOUBLE_EQ(t.lost_work_s, 0);
  EXPECT_EQ(t.lost_steps, 0);
  EXPECT_DOUBLE_EQ(t.restart_and_other_s, 14);
}

TEST_F(GoodputLedgerTest, TheSummaryAndResultLineCarryTheLedger) {
  RunReport r;
  r.on_attempt_start(0, at(0));
  r.on_event(0, started(0, ledger(1, 0.25, 0, 0, 0, 0, 0, 0, 0, 0)), at(1));
  r.on_event(0, finished(ledger(1, 0.25, 0, 8, 0, 0.5, 0.25, 0, 80, 8.8)), at(10));
  const auto lines = r.summary({api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 10, at(10));
  const std::string& result = lines.back();
  EXPECT_NE(
      result.find(
          " goodput=0.800 wall_s=10.00 lost_work_s=0.000 lost_steps=0 step_s=0.1100 startup_s=1.00 restore_s=0.00 "
          "training_s=8.00 data_wait_s=0.00 comm_wait_s=0.50 evaluation_s=0.25 checkpoint_s=0.00 "
          "comm_init_s=0.25 restart_other_s=0.25"),
      std::string::npos)
      << result;
  bool said = false;
  for (const auto& l : lines) said |= l.rfind("goodput 0.800 of 10.0 s: training 8.0 s, start-up 1.0 s", 0) == 0;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace torus::runtime

// Telemetry: what the loop's events become in the rank's metrics.
#include "worker/app/telemetry.h"

#include <gtest/gtest.h>

#include "common/process/worker_events.h"

namespace torus::worker::app {
namespace {

using train::EventKind;
using train::ProgressEvent;
using train::StepExecution;
using train::StepUpdate;

ProgressEvent step_event(int64_t step, int64_t images) {
  ProgressEvent e;
  e.kind = EventKind::kStep;
  e.step = step;
  e.images = images;
  e.step_seconds = 0.2;
  e.data_wait_seconds = 0.01;
  e.compute_seconds = 0.15;
  e.comm_wait_seconds = 0.03;
  e.elapsed_seconds = 0.2 * static_cast<double>(step);
  return e;
}

TelemetryOptions options() {
  TelemetryOptions o;
  o.world_size = 2;
  o.epochs = 2;
  o.total_steps = 10;
  o.global_batch = 128;
  o.per_rank_batch = 64;  // the first phase's; a later phase trains on more
  return o;
}

TEST(Telemetry, ImagesCountWhatEachStepTrainedOnNotTheFirstPhaseBatch) {
  Telemetry telemetry(options());
  telemetry.on_event(step_event(1, 64));
  telemetry.on_event(step_event(2, 64));
  telemetry.on_event(step_event(3, 192));  // a later phase with a larger batch
  EXPECT_DOUBLE_EQ(telemetry.metrics().images.value(), 64 + 64 + 192);
}

TEST(Telemetry, StepEventsSetProgressGauges) {
  Telemetry telemetry(options());
  ProgressEvent e = step_event(4, 64);
  e.fractional_epoch = 0.8;
  e.loss = 1.25;
  e.lr = 0.1;
  telemetry.on_event(e);
  EXPECT_DOUBLE_EQ(telemetry.metrics().global_step.value(), 4);
  EXPECT_DOUBLE_EQ(telemetry.metrics().epoch.value(), 0.8);
  EXPECT_DOUBLE_EQ(telemetry.metrics().loss.value(), 1.25);
}

TEST(Telemetry, Fp16StepsSetTheLossScaleAndCountTheSkippedOnes) {
  Telemetry telemetry(options());
  EXPECT_DOUBLE_EQ(telemetry.metrics().loss_scale.value(), 0) << "0 until an fp16 step reports one";
  ProgressEvent e = step_event(1, 64);
  e.loss_scale = 65536;
  telemetry.on_event(e);
  e = step_event(2, 64);
  e.loss_scale = 32768;
  e.update = StepUpdate::kSkipped;
  e.skipped_steps = 1;
  telemetry.on_event(e);
  e = step_event(3, 64);
  e.loss_scale = 32768;
  e.skipped_steps = 1;
  telemetry.on_event(e);
  EXPECT_DOUBLE_EQ(telemetry.metrics().loss_scale.value(), 32768);
  EXPECT_DOUBLE_EQ(telemetry.metrics().skipped_steps.value(), 1);
  EXPECT_DOUBLE_EQ(telemetry.metrics().replayed_steps.value(), 0);
  e = step_event(4, 64);
  e.execution = StepExecution::kReplayed;
  telemetry.on_event(e);
  EXPECT_DOUBLE_EQ(telemetry.metrics().replayed_steps.value(), 1) << "a replayed step counts";
}

// The rank's goodput ledger: steps split into training, data wait and communication wait; checkpoints and the
// evaluation after an epoch's end; start-up and restore from started(); the same seconds on /metrics.
TEST(Telemetry, TheLedgerSplitsTheRanksTime) {
  Telemetry telemetry(options());
  testing::internal::CaptureStdout();  // the event lines
  telemetry.started({}, train::LeftToTrain::kSome, {.startup_s = 1.5, .comm_init_s = 0.5, .restore_s = 0.25});
  telemetry.on_event(step_event(1, 64));
  telemetry.on_event(step_event(2, 64));
  ProgressEvent checkpoint;
  checkpoint.kind = EventKind::kCheckpoint;
  checkpoint.step = 2;
  checkpoint.checkpoint_seconds = 0.125;
  telemetry.on_event(checkpoint);
  ProgressEvent end;
  end.kind = EventKind::kEpochEnd;
  telemetry.on_event(end);
  ProgressEvent eval;
  eval.kind = EventKind::kEvaluation;
  telemetry.on_event(eval);
  const std::string events = testing::internal::GetCapturedStdout();
  using process::TimePart;
  const process::RankLedger& l = telemetry.ledger();
  EXPECT_DOUBLE_EQ(l[TimePart::kStartup], 1.5);
  EXPECT_DOUBLE_EQ(l[TimePart::kRestore], 0.25);
  EXPECT_DOUBLE_EQ(l.comm_init_s, 0.5);
  EXPECT_EQ(l.steps, 2);
  EXPECT_NEAR(l[TimePart::kTraining], 2 * (0.2 - 0.01 - 0.03), 1e-12);  // the step less its waits
  EXPECT_NEAR(l[TimePart::kDataWait], 0.02, 1e-12);
  EXPECT_NEAR(l[TimePart::kCommWait], 0.06, 1e-12);
  EXPECT_DOUBLE_EQ(l[TimePart::kCheckpoint], 0.125);
  EXPECT_GE(l[TimePart::kEvaluation], 0);
  EXPECT_DOUBLE_EQ(l.recent_step_s, 0.2);  // the first step left out
  const std::string exposed = telemetry.registry().expose();
  EXPECT_NE(exposed.find("torus_worker_goodput_seconds_total{job=\"local\",namespace=\"local\",rank=\"0\","
                         "attempt=\"0\",part=\"checkpoint\"} 0.125"),
            std::string::npos)
      << exposed;
  EXPECT_NE(exposed.find("torus_worker_comm_init_seconds{job=\"local\",namespace=\"local\",rank=\"0\","
                         "attempt=\"0\"} 0.5"),
            std::string::npos);
  // The checkpoint event carries the ledger as it stood once the checkpoint was written.
  const auto pos = events.find("\"event\":\"checkpoint\"");
  ASSERT_NE(pos, std::string::npos) << events;
  const auto line = events.substr(events.rfind('\n', pos) + 1, events.find('\n', pos) - events.rfind('\n', pos) - 1);
  const auto parsed = process::parse_event(line);
  ASSERT_TRUE(parsed) << line;
  const auto* written = std::get_if<process::CheckpointEvent>(&*parsed);
  ASSERT_NE(written, nullptr) << line;
  EXPECT_DOUBLE_EQ(written->ledger[TimePart::kCheckpoint], 0.125);
  EXPECT_DOUBLE_EQ(written->seconds, 0.125);
}

}  // namespace
}  // namespace torus::worker::app

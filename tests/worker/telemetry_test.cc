// Telemetry: what the loop's events become in the rank's metrics.
#include "worker/app/telemetry.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace torus::worker::app

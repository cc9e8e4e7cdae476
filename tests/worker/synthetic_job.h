#pragma once
// The TrainingJob the job tests share: one CPU rank, ResNet-9 on 256 synthetic 16x16 images of 4 classes, the
// anchors' recipe (one-cycle to 0.2, Nesterov, label smoothing, flips), 4 epochs to a 90% target.
#include "common/api/training_job.h"
#include "tests/support/job_builder.h"

namespace torus::worker::train::testing {

inline api::TrainingJob synthetic_job() {
  test::JobBuilder b("synthetic-smoke");
  b.input_channels(3).classes(4).synthetic(256, 128, 4).epochs(4).batch_size(32).one_cycle(0.2, 1, 0.02, 0.0).seed(5);
  api::TrainingSpec& t = b.spec().training;
  b.spec().model.pooling = api::Pooling::kMax;
  t.optimizer.type = api::OptimizerKind::kSgd;
  t.optimizer.momentum = 0.9;
  t.optimizer.nesterov = true;
  t.optimizer.weight_decay = 0.0005;
  t.label_smoothing = 0.1;
  t.augmentation.flip = true;
  t.target_accuracy = 0.9;
  return b.build();
}

}  // namespace torus::worker::train::testing

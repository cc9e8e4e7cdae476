// TrainingJob -> TrainConfig: the fields the worker reads, and the per-rank batch.
#include "worker/app/job_config.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/api/defaults.h"
#include "tests/worker/synthetic_job.h"

namespace torus::worker::app {
namespace {

using train::TrainConfig;
using train::testing::synthetic_job;

TEST(JobConfig, MapsTheTrainingJobFields) {
  const api::TrainingJob job = synthetic_job();
  const TrainConfig c = to_train_config(job.spec, 1);
  EXPECT_EQ(c.model.arch, api::Arch::kResNet9);
  EXPECT_EQ(c.model.widths, (std::vector<int64_t>{8, 8, 16, 32}));
  EXPECT_EQ(c.model.num_classes, 4);
  EXPECT_EQ(c.data.dataset, api::Dataset::kSynthetic);
  EXPECT_EQ(c.data.synthetic_train, 256);
  EXPECT_EQ(c.data.transform.flip, data::Flip::kHorizontal);
  ASSERT_EQ(c.phases.size(), 1u);
  EXPECT_EQ(c.phases[0].per_rank_batch, 32);
  EXPECT_EQ(c.phases[0].image_size, 16);
  EXPECT_EQ(c.epochs, 4);
  const optim::LrSchedule lr(c.lr_points);
  EXPECT_DOUBLE_EQ(lr.at(0), 0.02);
  EXPECT_DOUBLE_EQ(lr.at(1), 0.2);
  EXPECT_DOUBLE_EQ(lr.at(2.5), 0.1);
  EXPECT_DOUBLE_EQ(lr.at(4), 0.0);
  EXPECT_EQ(c.sgd.nesterov, math::Nesterov::kOn);
  EXPECT_FLOAT_EQ(c.label_smoothing, 0.1f);
  EXPECT_DOUBLE_EQ(c.target_accuracy, 0.9);
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(threads_for(job.spec), 1);
}

TEST(JobConfig, PerRankBatchDividesTheGlobalBatch) {
  const api::TrainingJob job = synthetic_job();
  api::TrainingJobSpec spec = job.spec;
  spec.gang.workers = 2;
  EXPECT_EQ(to_train_config(spec, 2).phases[0].per_rank_batch, 16);
}

TEST(JobConfig, EveryEpochsIsOneOnlyWhenEveryStepsIsUnset) {
  api::TrainingJob job = synthetic_job();
  job.spec.training.checkpoint.dir = "/ckpt";
  job.spec.training.checkpoint.every_epochs.reset();
  job.spec.training.checkpoint.every_steps = 50;
  EXPECT_EQ(to_train_config(api::with_defaults(job).spec, 1).checkpoint.every_epochs, 0) << "everySteps alone";
  job.spec.training.checkpoint.every_steps.reset();
  EXPECT_EQ(to_train_config(api::with_defaults(job).spec, 1).checkpoint.every_epochs, 1) << "neither set";
  job.spec.training.checkpoint.every_steps = 50;
  job.spec.training.checkpoint.every_epochs = 2;
  const TrainConfig both = to_train_config(api::with_defaults(job).spec, 1);
  EXPECT_EQ(both.checkpoint.every_epochs, 2);
  EXPECT_EQ(both.checkpoint.every_steps, 50);
}

}  // namespace
}  // namespace torus::worker::app

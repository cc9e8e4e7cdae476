// TrainingJob -> TrainConfig mapping, and one rank of a small synthetic job run through torus-worker's body.
#include <gtest/gtest.h>

#include "common/util/error.h"
#include "tests/support/job_builder.h"
#include "worker/train/job_config.h"
#include "worker/train/worker_main.h"

namespace torus::worker::train {
namespace {

// A small synthetic job that reaches 90% in 4 epochs on one rank.
api::TrainingJob synthetic_job() {
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

TEST(WorkerMain, RunsOneRankOfASyntheticJobToItsTarget) {
  const api::TrainingJob job = synthetic_job();
  LocalCollectives alone;
  const RunResult r = train_job(job, alone, nullptr, nullptr);
  EXPECT_TRUE(r.reached_target) << "top-1 " << r.last_eval.top1;
  EXPECT_EQ(r.last_eval.samples, 128);
}

TEST(WorkerMain, ArgumentsNameWhatIsWrong) {
  char prog[] = "torus-worker", job[] = "--job", file[] = "x.yaml", bad[] = "--jobs";
  char* ok_argv[] = {prog, job, file};
  EXPECT_EQ(parse_worker_args(3, ok_argv).job_file, "x.yaml");
  char* bad_argv[] = {prog, bad};
  try {
    parse_worker_args(2, bad_argv);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--jobs"), std::string::npos) << e.what();
  }
  char* none_argv[] = {prog};
  const WorkerOptions none = parse_worker_args(1, none_argv);
  EXPECT_TRUE(none.job_file.empty());
  // Without --job, the launch contract's TORUS_JOB_FILE names the job; with neither, the error says so.
  EXPECT_EQ(job_file_of(none, launch::rank_env_from({{"TORUS_JOB_FILE", "/etc/torus/job/job.json"}})),
            "/etc/torus/job/job.json");
  EXPECT_EQ(job_file_of(parse_worker_args(3, ok_argv), launch::rank_env_from({{"TORUS_JOB_FILE", "y.json"}})),
            "x.yaml");
  try {
    job_file_of(none, launch::rank_env_from({}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TORUS_JOB_FILE"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torus::worker::train

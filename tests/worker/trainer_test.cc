// The training loop: resume equivalence, checkpoint refusal, learning on a synthetic set, events.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/util/error.h"
#include "tests/support/temp_dir.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/checkpoint/checkpoint.h"

namespace torus::worker::train {
namespace {

class Recorder final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind == EventKind::kStep) step_losses.push_back(e.loss);
    events.push_back(e);
  }
  std::vector<double> step_losses;
  std::vector<ProgressEvent> events;
};

TrainConfig small_config(uint64_t seed = 3) {
  TrainConfig c;
  c.model.arch = api::Arch::kResNet9;
  c.model.widths = {8, 16, 32};
  c.model.num_classes = 4;
  c.data.dataset = api::Dataset::kSynthetic;
  c.data.synthetic_train = 256;
  c.data.synthetic_val = 128;
  c.data.synthetic_classes = 4;
  c.data.synthetic_size = 16;
  c.data.synthetic_channels = 3;
  c.data.transform.flip = data::Flip::kHorizontal;
  c.data.loader_threads = 1;
  c.epochs = 3;
  c.phases = {{.from_epoch = 0, .to_epoch = static_cast<int32_t>(c.epochs), .image_size = 16, .per_rank_batch = 32}};
  c.lr_points = {{0, 0.05}, {1, 0.2}, {3, 0.0}};
  c.sgd = {0.9f, math::Nesterov::kOn, 5e-4f};
  c.label_smoothing = 0.1f;
  c.seed = seed;
  c.eval_batch_size = 64;
  c.log_every_steps = 0;
  return c;
}

class TrainerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = cpu::make_cpu_backend(1);
  LocalCollectives world_;
};

TEST_F(TrainerTest, ResumingGivesTheSameNextLossesAsNotStopping) {
  const TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  // 8 batches per epoch: run 11 steps straight, crossing an epoch boundary and its evaluation.
  Recorder straight;
  Trainer a(*backend_, config, data, world_, nullptr, &straight);
  a.run(11);
  ASSERT_EQ(straight.step_losses.size(), 11u);

  const test::TempDir tmp("torus-trainer-test-resume");
  const std::string dir = tmp.str();
  const std::string path = dir + "/ckpt-5.torus";
  {
    Trainer b(*backend_, config, data, world_);
    b.run(5);
    EXPECT_EQ(b.step(), 5);
    b.save_checkpoint(path);
  }
  Recorder resumed;
  Trainer c(*backend_, config, data, world_, nullptr, &resumed);
  checkpoint::CheckpointReader reader(path);
  c.restore_checkpoint(reader);
  EXPECT_EQ(c.step(), 5);
  EXPECT_EQ(c.batch_in_epoch(), 5);
  c.run(6);
  ASSERT_EQ(resumed.step_losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_DOUBLE_EQ(resumed.step_losses[i], straight.step_losses[5 + i]) << "step " << 6 + i;
}

TEST_F(TrainerTest, CheckpointOfAnotherModelIsRefusedWithTheReason) {
  TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  const test::TempDir tmp("torus-trainer-test-mismatch");
  const std::string dir = tmp.str();
  const std::string path = dir + "/ckpt-0.torus";
  Trainer(*backend_, config, data, world_).save_checkpoint(path);
  config.model.widths = {8, 16, 64};
  Trainer other(*backend_, config, data, world_);
  checkpoint::CheckpointReader reader(path);
  try {
    other.restore_checkpoint(reader);
    FAIL() << "expected CorruptData";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("model signature mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, CorruptCheckpointIsSkippedAndTheOlderOneResumed) {
  TrainConfig config = small_config();
  const test::TempDir tmp("torus-trainer-test-corrupt");
  config.checkpoint.dir = tmp.str();
  config.checkpoint.every_steps = 2;
  config.checkpoint.every_epochs = 0;
  config.checkpoint.keep = 3;
  const Datasets data = load_datasets(config.data, config.seed);
  Trainer(*backend_, config, data, world_).run(4);  // writes ckpt-2 and ckpt-4
  const std::string newest = config.checkpoint.dir + "/ckpt-4.torus";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  EXPECT_THROW(checkpoint::CheckpointReader{newest}, CorruptData);
  Trainer resumed(*backend_, config, data, world_);
  ASSERT_TRUE(resumed.resume_latest());
  EXPECT_EQ(resumed.step(), 2);
}

TEST_F(TrainerTest, LearnsTheSyntheticSetAndStopsAtTheTarget) {
  TrainConfig config = small_config();
  config.epochs = 6;
  config.target_accuracy = 0.9;
  const Datasets data = load_datasets(config.data, config.seed);
  Recorder rec;
  Trainer t(*backend_, config, data, world_, nullptr, &rec);
  const EvalResult before = t.evaluate();
  RunResult r = t.run();
  EXPECT_TRUE(r.reached_target) << "top-1 " << r.last_eval.top1 << " (before training " << before.top1 << ")";
  EXPECT_GE(r.last_eval.top1, 0.9);
  EXPECT_EQ(r.last_eval.samples, 128);
  EXPECT_LT(rec.step_losses.back(), rec.step_losses.front());
  int evaluations = 0;
  for (const auto& e : rec.events) evaluations += e.kind == EventKind::kEvaluation ? 1 : 0;
  EXPECT_EQ(evaluations, r.epochs_completed);
  EXPECT_EQ(rec.events.back().kind, EventKind::kFinished);
}

}  // namespace
}  // namespace torus::worker::train

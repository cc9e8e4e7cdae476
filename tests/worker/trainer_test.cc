// The training loop: resume equivalence, checkpoint refusal, learning on a synthetic set, events.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/util/error.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_config_builder.h"
#include "tests/worker/recording_backend.h"
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

// 3 epochs of 8 steps with flips, a warm-up to 0.2 and label smoothing (SgdConfig's Nesterov momentum, weight decay).
TrainConfig small_config(uint64_t seed = 3) {
  return test::TrainConfigBuilder()
      .epochs(3)
      .flip(data::Flip::kHorizontal)
      .lr({{0, 0.05}, {1, 0.2}, {3, 0.0}})
      .label_smoothing(0.1f)
      .seed(seed)
      .build();
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
  ASSERT_TRUE(resumed.resume().from_checkpoint());
  EXPECT_EQ(resumed.step(), 2);
}

// A run resumed from the end of its training trains nothing and says so: its checkpoint's evaluation stands, whether
// the run had done all its epochs or reached its target (the target of the resumed run: a higher one trains on).
TEST_F(TrainerTest, ARunResumedAtItsEndHasNothingLeftAndKeepsItsEvaluation) {
  TrainConfig config = small_config();
  config.epochs = 1;
  const test::TempDir tmp("torus-trainer-test-nothing-left");
  config.checkpoint.dir = tmp.str();
  config.checkpoint.run = "first";
  const Datasets data = load_datasets(config.data, config.seed);
  const RunResult first = Trainer(*backend_, config, data, world_).run();
  ASSERT_GT(first.last_eval.samples, 0);

  config.checkpoint.run = "again";
  config.checkpoint.resume_from = "first";
  Trainer again(*backend_, config, data, world_);
  const Resumed resumed = again.resume();
  EXPECT_EQ(resumed.reason, launch::ResumeReason::kResumeFrom);
  EXPECT_EQ(resumed.from_run, "first");
  EXPECT_EQ(resumed.step, first.steps);
  EXPECT_EQ(again.left_to_train(), LeftToTrain::kNoneAllEpochsDone);
  const RunResult nothing = again.run();
  EXPECT_EQ(nothing.left_at_start, LeftToTrain::kNoneAllEpochsDone);
  EXPECT_EQ(nothing.epochs_completed, 0);
  EXPECT_EQ(nothing.steps, first.steps);
  EXPECT_DOUBLE_EQ(nothing.last_eval.top1, first.last_eval.top1) << "the checkpoint's evaluation, not none";

  // Its target (at or below the accuracy reached) was met at that checkpoint: nothing left either, with more epochs.
  config.epochs = 3;
  config.target_accuracy = first.last_eval.top1;
  Trainer met(*backend_, config, data, world_);
  met.resume();
  EXPECT_EQ(met.left_to_train(), LeftToTrain::kNoneTargetReached);
  // A higher target trains on.
  config.target_accuracy = first.last_eval.top1 + 0.01;
  Trainer more(*backend_, config, data, world_);
  more.resume();
  EXPECT_EQ(more.left_to_train(), LeftToTrain::kSome);
  EXPECT_GT(more.run(2).steps, first.steps);
}

// A new run does not resume another run's checkpoint in the same folder: it starts at step 0 and is told of it.
TEST_F(TrainerTest, ANewRunStartsFromStepZeroBesideAnotherRunsCheckpoints) {
  TrainConfig config = small_config();
  const test::TempDir tmp("torus-trainer-test-new-run");
  config.checkpoint.dir = tmp.str();
  config.checkpoint.every_steps = 2;
  config.checkpoint.run = "first";
  const Datasets data = load_datasets(config.data, config.seed);
  Trainer(*backend_, config, data, world_).run(4);
  config.checkpoint.run = "second";
  Trainer second(*backend_, config, data, world_);
  const Resumed resumed = second.resume();
  EXPECT_EQ(resumed.reason, launch::ResumeReason::kFresh);
  EXPECT_EQ(second.step(), 0);
  ASSERT_EQ(resumed.other_runs.size(), 1u);
  EXPECT_EQ(resumed.other_runs[0].run, "first");
  EXPECT_EQ(resumed.other_runs[0].newest_step, 4);
  second.run(2);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "second" / "ckpt-2.torus")) << "its own folder";
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "first" / "ckpt-4.torus")) << "the other run's kept";
  // A restart of the second run resumes its own.
  Trainer restarted(*backend_, config, data, world_);
  EXPECT_EQ(restarted.resume().reason, launch::ResumeReason::kThisRun);
  EXPECT_EQ(restarted.step(), 2);
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

// --- training.precision: what the trainer asks of the backend -------------------------------------------------

TEST_F(TrainerTest, HalfPrecisionOnTheCpuEngineIsRefusedNamingTheField) {
  TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  for (api::Precision precision : {api::Precision::kBf16, api::Precision::kFp16}) {
    config.precision = precision;
    try {
      Trainer t(*backend_, config, data, world_);
      FAIL() << "expected InvalidArgument for " << api::to_string(precision);
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("training.precision: " + std::string(api::to_string(precision))),
                std::string::npos)
          << e.what();
    }
  }
}

// The ops of one step, from the batch's upload to the last call before the next batch.
std::vector<std::string> names(const std::vector<testing::RecordedOp>& ops) {
  std::vector<std::string> out;
  for (const auto& op : ops) out.push_back(op.op);
  return out;
}

size_t index_of(const std::vector<std::string>& ops, const std::string& op, bool last = false) {
  size_t found = ops.size();
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i] == op && (last || found == ops.size())) found = i;
  return found;
}

// The small run in one precision on a backend that records what it is asked to do.
class TrainerPrecision : public ::testing::Test {
 protected:
  static TrainConfig config_in(api::Precision precision) {
    TrainConfig c = small_config();
    c.precision = precision;
    return c;
  }
  testing::RecordingBackend backend;
  LocalCollectives world;
  const Datasets data = load_datasets(small_config().data, small_config().seed);
};

TEST_F(TrainerPrecision, Bf16ConvertsTheBatchAndScalesNothing) {
  Trainer t(backend, config_in(api::Precision::kBf16), data, world);
  EXPECT_EQ(t.precision().activations, DType::kBF16);
  EXPECT_EQ(t.model().context().activation_dtype, DType::kBF16);
  backend.ops.clear();
  t.run(2);
  const auto ops = names(backend.ops);
  ASSERT_FALSE(backend.named("copy").empty());
  EXPECT_EQ(backend.named("copy").front().out, DType::kBF16) << "the batch is converted before the first conv";
  EXPECT_LT(index_of(ops, "copy"), index_of(ops, "conv"));
  EXPECT_EQ(backend.named("conv").front().out, DType::kBF16);
  EXPECT_EQ(backend.named("linear").front().out, DType::kF32);
  for (const char* none : {"enable_loss_scaling", "unscale", "update_loss_scale", "sgd_skipped"})
    EXPECT_EQ(index_of(ops, none), ops.size()) << none;
}

// Marks in the backend's record where the gradient averaging finished.
class MarkingSync final : public GradientSync {
 public:
  explicit MarkingSync(testing::RecordingBackend& backend) : backend_(backend) {}
  void begin_step() override {}
  void grad_ready(size_t /*param_index*/) override {}
  void finish_step() override { backend_.ops.push_back({"all_reduce_done", DType::kF32}); }

 private:
  testing::RecordingBackend& backend_;
};

TEST_F(TrainerPrecision, Fp16UnscalesAfterTheAllReduceSkipsAnOverflowedStepAndKeepsTheScaleInCheckpoints) {
  const TrainConfig config = config_in(api::Precision::kFp16);
  Recorder rec;
  Trainer t(
      backend, config, data, world, [&](const Arena&) { return std::make_unique<MarkingSync>(backend); }, &rec);
  EXPECT_EQ(index_of(names(backend.ops), "enable_loss_scaling"), 0u) << "enabled before anything else ran";
  backend.ops.clear();
  t.run(1);
  {
    const auto ops = names(backend.ops);
    EXPECT_EQ(backend.named("copy").front().out, DType::kF16);
    // Gradients are complete (the last weight gradient), then unscaled, then the update, then the scale advances.
    const size_t unscale = index_of(ops, "unscale");
    ASSERT_LT(unscale, ops.size());
    EXPECT_GT(unscale, index_of(ops, "conv_backward_weights", true));
    EXPECT_GT(unscale, index_of(ops, "all_reduce_done")) << "every rank must unscale the same averaged gradients";
    EXPECT_LT(unscale, index_of(ops, "sgd"));
    EXPECT_EQ(index_of(ops, "update_loss_scale"), ops.size() - 1);
    EXPECT_EQ(backend.named("unscale").size(), 1u) << "one pass over the whole gradient arena";
    EXPECT_EQ(backend.named("unscale").front().out, DType::kF32) << "fp32 gradients";
    EXPECT_TRUE(backend.named("sgd_skipped").empty());
  }
  ASSERT_EQ(rec.step_losses.size(), 1u);
  EXPECT_EQ(rec.events.front().loss_scale, 65536.0);
  EXPECT_EQ(rec.events.front().skipped_steps, 0);

  backend.inject_overflow = true;  // this step's gradients hold an inf
  backend.ops.clear();
  rec.events.clear();
  t.run(1);
  EXPECT_TRUE(backend.named("sgd").empty()) << "no parameter moves on an overflowed step";
  EXPECT_FALSE(backend.named("sgd_skipped").empty());
  EXPECT_EQ(rec.events.front().loss_scale, 32768.0) << "backed off by half";
  EXPECT_EQ(rec.events.front().skipped_steps, 1);
  backend.ops.clear();
  t.run(1);
  EXPECT_FALSE(backend.named("sgd").empty()) << "the next step updates again";

  const test::TempDir tmp("torus-trainer-test-fp16");
  const std::string path = tmp.str() + "/ckpt-3.torus";
  t.save_checkpoint(path);
  testing::RecordingBackend other;
  Trainer resumed(other, config, data, world);
  resumed.restore_checkpoint(checkpoint::CheckpointReader(path));
  const LossScaleState s = other.loss_scale_state();
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.good_steps, 1);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(checkpoint::CheckpointReader(path).metadata().at("loss_scale").at("skipped"), 1);
}

}  // namespace
}  // namespace torus::worker::train

// The training loop's device path (worker/train/trainer_device.cc) on the CPU, through a backend that reports device
// memory and offers staging, augmentation and captured steps like the CUDA backend (pretend_device_backend.h): the
// captured, staged run trains exactly like the host loop under a learning-rate schedule; batch k+1 is staged before
// step k's loss is read; losses are read once per log interval; the device augments the loader's raw pixels with the
// job's augmentation.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "tests/worker/pretend_device_backend.h"
#include "tests/worker/recording_backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using torus::worker::testing::PretendDeviceBackend;

class Recorder final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind == EventKind::kStep) {
      losses.push_back(e.loss);
      steps.push_back(e.step);
      replayed += e.execution == StepExecution::kReplayed ? 1 : 0;
    }
  }
  std::vector<double> losses;
  std::vector<int64_t> steps;
  int replayed = 0;
};

TrainConfig small_config() {
  TrainConfig c;
  c.model.arch = api::Arch::kResNet9;
  c.model.widths = {8, 16, 32};
  c.model.num_classes = 4;
  c.data.synthetic_train = 256;  // 8 batches of 32
  c.data.synthetic_val = 64;
  c.data.synthetic_classes = 4;
  c.data.synthetic_size = 16;
  c.data.transform.flip = data::Flip::kHorizontal;
  c.data.loader_threads = 1;
  c.epochs = 2;
  c.phases = {{.from_epoch = 0, .to_epoch = 2, .image_size = 16, .per_rank_batch = 32}};
  c.lr_points = {{0, 0.02}, {1, 0.2}, {2, 0.0}};  // a different rate every step
  c.sgd = {0.9f, math::Nesterov::kOn, 5e-4f};
  c.label_smoothing = 0.1f;
  c.seed = 11;
  c.eval_batch_size = 64;
  c.log_every_steps = 4;
  return c;
}

std::vector<float> parameters(Backend& backend, Trainer& t) {
  const Tensor all = t.model().context().params.all();
  std::vector<float> out(static_cast<size_t>(all.numel()));
  backend.download(all, out.data());
  return out;
}

size_t count(const std::vector<std::string>& log, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(log.begin(), log.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; }));
}

TEST(TrainerDevice, CapturedStagedStepsTrainExactlyLikeTheHostLoop) {
  const TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  auto host = cpu::make_cpu_backend(1);
  Recorder want;
  Trainer reference(*host, config, data, world, nullptr, &want);
  const RunResult expected = reference.run();

  // The loader augments on the host in both runs (no device augmentation offered): the same batches.
  PretendDeviceBackend device({.staging = true, .augment = false, .capture = true});
  Recorder got;
  Trainer t(device, config, data, world, nullptr, &got);
  EXPECT_EQ(t.device_plan().staging, Staging::kPinned);
  EXPECT_EQ(t.device_plan().augment, AugmentAt::kHost);
  EXPECT_EQ(t.device_plan().step, StepRun::kCaptured);
  const RunResult result = t.run();

  ASSERT_EQ(result.steps, 16);
  EXPECT_EQ(t.step_captures(), 2) << "one capture per epoch";
  EXPECT_EQ(t.step_replays(), 14) << "every step but each epoch's eager first";
  EXPECT_EQ(got.replayed, 14) << "the step events say which steps were replays (the metric counts them)";
  EXPECT_EQ(want.replayed, 0);
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_EQ(got.steps[i], want.steps[i]);
    EXPECT_EQ(static_cast<float>(got.losses[i]), static_cast<float>(want.losses[i])) << "step " << i;
  }
  EXPECT_EQ(parameters(device, t), parameters(*host, reference))
      << "replays read the schedule's rate from device memory, not the one at capture time";
  EXPECT_EQ(result.last_eval.top1, expected.last_eval.top1);
}

// A gradient sync of one rank (the gradients stay as they are) that says whether a graph can hold it and counts the
// replays it is told about.
struct SyncCalls {
  int replayed = 0;
};
class OneRankSync final : public GradientSync {
 public:
  OneRankSync(bool capturable, SyncCalls& calls) : capturable_(capturable), calls_(calls) {}
  void begin_step() override {}
  void grad_ready(size_t /*param_index*/) override {}
  void finish_step() override {}
  bool capturable() const override { return capturable_; }
  void replayed() override { ++calls_.replayed; }

 private:
  bool capturable_;
  SyncCalls& calls_;
};

// With a gradient sync a graph can hold (NCCL's, with TORUS_NCCL_GRAPHS=1), steps are captured and replayed as with
// one rank, and the sync is told of every replay (it watches the replay's collectives); one it cannot hold (host
// collectives) keeps every step eager.
TEST(TrainerDevice, AGradientSyncAGraphCanHoldIsCapturedAndToldOfEachReplay) {
  const TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  auto host = cpu::make_cpu_backend(1);
  Trainer reference(*host, config, data, world);
  reference.run();

  for (bool capturable : {true, false}) {
    SyncCalls calls;
    const GradientSyncFactory factory = [&](const Arena& /*grads*/) {
      return std::make_unique<OneRankSync>(capturable, calls);
    };
    PretendDeviceBackend device({.staging = true, .augment = false, .capture = true});
    Trainer t(device, config, data, world, factory);
    ASSERT_EQ(t.device_plan().step, capturable ? StepRun::kCaptured : StepRun::kEager) << t.device_plan().step_why;
    t.run();
    EXPECT_EQ(t.step_replays(), capturable ? 14 : 0);
    EXPECT_EQ(calls.replayed, t.step_replays()) << "replayed() once per replay, never for an eager step";
    EXPECT_EQ(parameters(device, t), parameters(*host, reference));
  }
}

TEST(TrainerDevice, StagesTheNextBatchBeforeReadingTheLossAndReadsLossesPerLogInterval) {
  const TrainConfig config = small_config();
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  PretendDeviceBackend device({.staging = true, .augment = true, .capture = true});
  Trainer t(device, config, data, world);
  device.log.clear();
  t.run(8);  // one epoch: 8 steps, then the evaluation (which downloads nothing)

  const std::vector<std::string>& log = device.log;
  EXPECT_EQ(count(log, "stage"), 8u);
  EXPECT_EQ(count(log, "acquire"), 8u);
  EXPECT_EQ(count(log, "release"), 8u);
  EXPECT_EQ(count(log, "update"), 8u);
  EXPECT_EQ(count(log, "download"), 2u) << "steps 4 and 8 (log interval 4), not every step";
  // After each step's update (its last op) the next batch is staged before anything waits for the device.
  std::vector<std::string> order;
  for (const std::string& s : log)
    if (s == "update" || s == "download" || s.rfind("stage", 0) == 0) order.push_back(s.substr(0, 5));
  const std::vector<std::string> expected = {"stage", "updat", "stage", "updat", "stage", "updat",
                                             "stage", "updat", "stage", "downl", "updat", "stage",
                                             "updat", "stage", "updat", "stage", "updat", "downl"};
  EXPECT_EQ(order, expected);
}

TEST(TrainerDevice, TheDeviceAugmentsTheLoadersRawPixelsWithTheJobsAugmentation) {
  TrainConfig config = small_config();
  config.data.transform.train_crop = data::TrainCrop::kPadCrop;
  config.data.transform.pad = 2;
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  PretendDeviceBackend device({.staging = true, .augment = true, .capture = true});
  Trainer t(device, config, data, world);
  ASSERT_EQ(t.device_plan().augment, AugmentAt::kDevice);
  t.run(3);

  ASSERT_EQ(device.augment_specs.size(), 3u) << "one augmentation per step";
  const AugmentSpec& spec = device.augment_specs.front();
  EXPECT_EQ(spec.max_shift, 2);
  EXPECT_TRUE(spec.flip);
  std::vector<float> mean, stddev;
  dynamic_cast<const data::ArrayDataset&>(*data.train).channel_stats(mean, stddev);
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(spec.mean[c], mean[c]);
    EXPECT_FLOAT_EQ(spec.inv_std[c], 1.0f / stddev[c]);
  }
  EXPECT_EQ(device.augment_first_samples, (std::vector<uint64_t>{0, 32, 64}));
  // The loader did not augment: the device got the stored pixels of the epoch's first batch, in the sampler's order.
  data::LoaderConfig lc;
  lc.batch_size = 32;
  lc.seed = config.seed;
  lc.last_batch = data::LastBatch::kDrop;
  const data::EpochPlan plan = data::plan_epoch(*data.train, lc, 0);
  const auto& array = dynamic_cast<const data::ArrayDataset&>(*data.train);
  const size_t per_image = 16 * 16 * 3;
  std::vector<uint8_t> first;
  for (int64_t p = 0; p < 32; ++p) {
    const auto index = static_cast<size_t>(plan.order[static_cast<size_t>(p)]);
    first.insert(first.end(), array.pixels().begin() + static_cast<std::ptrdiff_t>(index * per_image),
                 array.pixels().begin() + static_cast<std::ptrdiff_t>((index + 1) * per_image));
  }
  EXPECT_EQ(device.augment_inputs.front(), first);
}

TEST(TrainerDevice, ADivergedLossReadLateStillNamesItsStep) {
  TrainConfig config = small_config();
  config.lr_points = {{0, 1e9}};
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  PretendDeviceBackend device({.staging = true, .augment = true, .capture = true});
  Trainer t(device, config, data, world);
  try {
    t.run(8);
    FAIL() << "a loss of 1e9-rate steps is not finite";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("training diverged"), std::string::npos) << what;
    EXPECT_NE(what.find("at step"), std::string::npos) << what;
  }
}

// Loss-scale readings of the fp16 steps, as the step events carry them.
class LossScales final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind != EventKind::kStep) return;
    scales.push_back(e.loss_scale);
    skipped += e.update == StepUpdate::kSkipped ? 1 : 0;
  }
  std::vector<double> scales;
  int skipped = 0;
};

// fp16 on a device backend: the loss scale is read with the losses, once per log interval, never once per step (each
// read waits for the device's queue), and a skipped step still counts once.
TEST(TrainerDevice, Fp16ReadsTheLossScaleOncePerLogIntervalNotPerStep) {
  TrainConfig config = small_config();
  config.precision = api::Precision::kFp16;
  const Datasets data = load_datasets(config.data, config.seed);
  LocalCollectives world;
  auto recording = std::make_unique<testing::RecordingBackend>();
  testing::RecordingBackend& inner = *recording;
  PretendDeviceBackend device({.staging = true, .augment = false, .capture = false}, std::move(recording));
  LossScales seen;
  Trainer t(device, config, data, world, nullptr, &seen);
  ASSERT_EQ(t.device_plan().staging, Staging::kPinned);
  const int before = device.loss_scale_reads();
  t.run(4);  // one log interval
  EXPECT_EQ(device.loss_scale_reads() - before, 1) << "4 steps, one read";
  inner.inject_overflow = true;  // step 5's gradients overflow
  t.run(4);
  EXPECT_EQ(device.loss_scale_reads() - before, 2);
  ASSERT_EQ(seen.scales.size(), 8u);
  EXPECT_EQ(seen.scales.front(), 65536.0);
  EXPECT_EQ(seen.scales.back(), 32768.0) << "backed off after the overflow";
  EXPECT_EQ(seen.skipped, 1);
}

}  // namespace
}  // namespace torus::worker::train

// training.precision on the GPU engine (issue 14.1): bf16 and fp16 train a small ResNet-9 with losses close to fp32's
// (fp32 master weights, half activations, fp16 with dynamic loss scaling); the Trainer runs a whole fp16 job; and with
// two GPUs an overflow injected into one rank's gradients makes every rank skip that same step (the unscale runs
// after the all-reduce). Without a device each test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu/gpu_training.h"
#include "tests/support/run_ranks.h"
#include "tests/support/train_config_builder.h"
#include "worker/app/train_adapters.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/comm/nccl/nccl_gradient_sync.h"
#include "worker/comm/store.h"
#include "worker/nn/model.h"
#include "worker/train/step.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

constexpr int64_t kBatch = 16, kSize = 16, kClasses = 10;
// Small enough that fp32 descends smoothly (at 0.05 the small ResNet-9's loss first rises on a fixed batch, and
// half precision's rounding then moves a chaotic trajectory by more than its rounding).
constexpr float kLr = 0.01f;

std::string trajectory(const std::vector<double>& losses) {
  std::string s;
  for (double l : losses) s += " " + std::to_string(l);
  return s;
}

nn::ModelConfig model_config(DType activations) { return testing::small_resnet9(kBatch, kSize, kClasses, activations); }

// One fixed batch (the same for every precision), uploaded in fp32 and converted to the activations' dtype.
struct Batch {
  Buffer f32_buf, x_buf, y_buf;
  Tensor x, y;
  Batch(Backend& b, DType activations, int rank = 0) {
    std::mt19937_64 rng(27 + static_cast<uint64_t>(rank));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> images(static_cast<size_t>(kBatch * kSize * kSize));
    for (float& v : images) v = normal(rng);
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < kBatch; ++i) labels.push_back(static_cast<int32_t>((i * 7 + rank) % kClasses));
    const Shape shape{kBatch, kSize, kSize, 1};
    f32_buf = b.allocate(images.size() * sizeof(float));
    x_buf = b.allocate(images.size() * dtype_size(activations));
    y_buf = b.allocate(labels.size() * sizeof(int32_t));
    const Tensor f32 = f32_buf.view(shape);
    b.upload(images.data(), f32);
    x = x_buf.view(shape, activations);
    b.copy(f32, x);  // converts
    y = y_buf.view({kBatch}, DType::kI32);
    b.upload(labels.data(), y);
  }
};

// Trains `steps` steps on the fixed batch with the plan of `precision`; returns each step's loss.
std::vector<double> train_losses(api::Precision precision, int steps) {
  const PrecisionPlan plan = precision_plan(precision);
  auto backend = testing::exact_fp32_backend(0);
  nn::Model model(*backend, model_config(plan.activations));
  if (plan.loss_scaling == LossScaling::kDynamic) backend->enable_loss_scaling(plan.loss_scale);
  TrainStep step(model, optim::SgdConfig{}, 0.1f, nullptr, plan.loss_scaling);
  Batch batch(*backend, plan.activations);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(step.run(batch.x, batch.y, kLr));
  if (plan.loss_scaling == LossScaling::kDynamic) {
    const LossScaleState state = backend->loss_scale_state();
    EXPECT_EQ(state.skipped, 0) << "a small net at the initial scale 65536 should not overflow";
    EXPECT_EQ(state.scale, plan.loss_scale.init_scale);
  }
  return losses;
}

class GpuPrecision : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found none, GPU test not run";
  }
};

TEST_F(GpuPrecision, Bf16AndFp16TrainWithLossesCloseToFp32) {
  constexpr int kSteps = 8;
  const std::vector<double> fp32 = train_losses(api::Precision::kFp32, kSteps);
  ASSERT_LT(fp32.back(), fp32.front()) << "the fp32 reference does not learn the batch";
  for (api::Precision half : {api::Precision::kBf16, api::Precision::kFp16}) {
    const std::vector<double> losses = train_losses(half, kSteps);
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_TRUE(std::isfinite(losses[static_cast<size_t>(s)])) << api::to_string(half) << " step " << s;
      // Same weights at step 0, so only the rounding of the activations differs; later the trajectories may drift
      // by what half precision rounds away (bf16: 8 bits of mantissa), not by a different optimization.
      const double tolerance = (s == 0 ? 0.02 : 0.10) * fp32[static_cast<size_t>(s)];
      EXPECT_NEAR(losses[static_cast<size_t>(s)], fp32[static_cast<size_t>(s)], tolerance)
          << api::to_string(half) << " step " << s << "; fp32:" << trajectory(fp32) << "; " << api::to_string(half)
          << ":" << trajectory(losses);
    }
    EXPECT_LT(losses.back(), losses.front()) << api::to_string(half) << " does not learn";
  }
}

// The whole loop: the Trainer stages and augments each batch on the device, captures its steps, scales, unscales and
// reports the scale.
TEST_F(GpuPrecision, TheTrainerRunsAnFp16JobAndReportsItsLossScale) {
  class Scales final : public TrainObserver {
   public:
    void on_event(const ProgressEvent& e) override {
      if (e.kind == EventKind::kStep) scales.push_back(e.loss_scale);
    }
    std::vector<double> scales;
  } observer;
  const TrainConfig c = test::TrainConfigBuilder()
                            .synthetic(256, 64)
                            .epochs(2)
                            .lr({{0, 0.05}, {2, 0.0}})
                            .precision(api::Precision::kFp16)
                            .build();
  auto backend = testing::exact_fp32_backend(0);
  LocalCollectives world;
  const Datasets data = load_datasets(c.data, c.seed);
  Trainer trainer(*backend, c, data, world, nullptr, &observer);
  EXPECT_EQ(trainer.model().context().activation_dtype, DType::kF16);
  // The GPU path of the loop (device_plan.h): staged batches augmented on the device, captured steps.
  EXPECT_EQ(trainer.device_plan().staging, Staging::kPinned);
  EXPECT_EQ(trainer.device_plan().augment, AugmentAt::kDevice);
  EXPECT_EQ(trainer.device_plan().step, StepRun::kCaptured);
  const RunResult r = trainer.run();
  EXPECT_EQ(r.steps, 16);
  EXPECT_EQ(trainer.step_captures(), 2) << "one per epoch";
  EXPECT_EQ(trainer.step_replays(), 14) << "every step but each epoch's first";
  ASSERT_EQ(observer.scales.size(), 16u);
  for (double s : observer.scales) EXPECT_GE(s, 1.0) << "every fp16 step reports its scale";
  EXPECT_GT(r.last_eval.top1, 0.25) << "no better than chance on 4 classes";
}

// Two ranks (one GPU each); rank 0's gradient holds an inf at step kOverflowStep before the all-reduce. The average is
// inf on both ranks, so both unscales flag it and both skip that step: the parameters stay identical across ranks.
class OverflowingSync final : public GradientSync {
 public:
  OverflowingSync(GradientSync& inner, Backend& backend, const Arena& grads, int rank, int overflow_step)
      : inner_(inner), backend_(backend), grads_(grads), rank_(rank), overflow_step_(overflow_step) {}
  void begin_step() override {
    ++step_;
    inner_.begin_step();
  }
  void grad_ready(size_t i) override {
    if (rank_ == 0 && step_ == overflow_step_ && !injected_) {
      // Queued on the compute stream before the bucket's all-reduce is ordered after it.
      backend_.fill(Tensor(grads_.view(i).data(), {1}), std::numeric_limits<float>::infinity());
      injected_ = true;
    }
    inner_.grad_ready(i);
  }
  void finish_step() override { inner_.finish_step(); }

 private:
  GradientSync& inner_;
  Backend& backend_;
  const Arena& grads_;
  int rank_, overflow_step_, step_ = -1;
  bool injected_ = false;
};

TEST_F(GpuPrecision, Fp16OverflowOnOneRankSkipsThatStepOnEveryRank) {
  constexpr int kRanks = 2, kSteps = 4, kOverflowStep = 2;
  const int gpus = cuda::device_count();
  if (gpus < kRanks)
    GTEST_SKIP() << "needs 2 CUDA devices (NCCL allows one rank per device), found " << gpus
                 << ": the every-rank skip is not checked here";
  comm::TcpStoreServer server("127.0.0.1", 0, "gpu-fp16");
  comm::TcpStoreOptions so;
  so.port = server.port();
  so.secret = "gpu-fp16";
  auto store = std::make_shared<comm::TcpStore>(so);
  const PrecisionPlan plan = precision_plan(api::Precision::kFp16);
  std::vector<LossScaleState> states(kRanks);
  std::vector<std::vector<float>> before(kRanks), after(kRanks), final_params(kRanks);
  ::torus::test::run_ranks(kRanks, [&](int rank) {
    auto backend = testing::exact_fp32_backend(rank);
    nn::Model model(*backend, model_config(plan.activations));
    backend->enable_loss_scaling(plan.loss_scale);
    const Arena& grads = model.context().grads;
    std::vector<comm::ParamSpan> spans;
    for (const ArenaEntry& e : grads.entries()) spans.push_back({e.offset, e.elements});
    auto nccl =
        std::make_unique<comm::NcclCommunicator>(rank, kRanks, std::make_shared<comm::PrefixStore>("fp16", store), rank,
                                                 std::chrono::milliseconds(60000), "nccl/gradients/id");
    const Tensor all = grads.all();
    comm::NcclGradientSync nccl_sync(std::move(nccl), backend->compute_stream(), all.f32(),
                                     static_cast<size_t>(all.numel()), std::move(spans), comm::BucketOptions{});
    worker::app::GradientSyncOf<comm::NcclGradientSync> hooks(nccl_sync);
    OverflowingSync sync(hooks, *backend, grads, rank, kOverflowStep);
    TrainStep step(model, optim::SgdConfig{}, 0.1f, &sync, plan.loss_scaling);
    Batch batch(*backend, plan.activations, rank);
    const auto r = static_cast<size_t>(rank);
    for (int s = 0; s < kSteps; ++s) {
      if (s == kOverflowStep) before[r] = nn::export_plain(model.context(), model.context().params);
      step.run(batch.x, batch.y, kLr);
      if (s == kOverflowStep) after[r] = nn::export_plain(model.context(), model.context().params);
    }
    nccl_sync.drain();
    states[r] = backend->loss_scale_state();
    final_params[r] = nn::export_plain(model.context(), model.context().params);
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    const auto r = static_cast<size_t>(rank);
    EXPECT_EQ(states[r].skipped, 1) << "rank " << rank;
    EXPECT_EQ(states[r].scale, plan.loss_scale.init_scale * plan.loss_scale.backoff_factor) << "rank " << rank;
    EXPECT_EQ(after[r], before[r]) << "rank " << rank << " moved its parameters on the overflowed step";
  }
  EXPECT_EQ(final_params[0], final_params[1]) << "the ranks' parameters diverged";
}

}  // namespace
}  // namespace torus::worker::train

// One training step (TrainStep) on the CPU engine: it learns a fixed batch, tells the gradient sync about every
// parameter once per step in backward order between begin_step and finish_step, counts the wait in finish_step as
// communication wait, and evaluation counts every sample with top-5 clamped to the number of classes.
#include "worker/train/step.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "tests/worker/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker::train {
namespace {

constexpr int64_t kBatch = 8, kSize = 8, kClasses = 4;

// Records the calls of each step. finish_step returns only once the clock has moved past its entry (a stand-in
// for an all-reduce that backward did not hide) and records how long it held.
class RecordingSync final : public GradientSync {
 public:
  void begin_step() override {
    calls.push_back("begin");
    ready.emplace_back();
  }
  void grad_ready(size_t i) override {
    calls.push_back("ready");
    ready.back().push_back(i);
  }
  void finish_step() override {
    calls.push_back("finish");
    const auto entered = std::chrono::steady_clock::now();
    auto now = entered;
    while (now <= entered) now = std::chrono::steady_clock::now();
    held.push_back(std::chrono::duration<double>(now - entered).count());
  }
  std::vector<std::string> calls;
  std::vector<std::vector<size_t>> ready;  // per step, in call order
  std::vector<double> held;                // seconds, per step
};

struct Fixture {
  std::unique_ptr<Backend> backend = cpu::make_cpu_backend(1);
  nn::Model model{*backend, config()};
  std::vector<float> images = testing::random_vector(kBatch * kSize * kSize * 3, 11);
  std::vector<int32_t> labels;
  Tensor x{images.data(), {kBatch, kSize, kSize, 3}};  // (N, H, W, C)
  Tensor y;                                            // (N)
  Fixture() {
    for (int64_t i = 0; i < kBatch; ++i) labels.push_back(static_cast<int32_t>(i % kClasses));
    y = Tensor(labels.data(), {kBatch}, DType::kI32);
  }
  static nn::ModelConfig config() {
    nn::ModelConfig c;
    c.widths = {8, 8, 16};
    c.num_classes = kClasses;
    c.batch_size = kBatch;
    c.image_size = kSize;
    c.seed = 3;
    return c;
  }
};

TEST(TrainStep, LearnsAFixedBatchAndAnnouncesEveryGradientOnceInBackwardOrder) {
  Fixture f;
  RecordingSync sync;
  TrainStep step(f.model, optim::SgdConfig{}, 0.0f, &sync);
  std::vector<double> losses;
  for (int s = 0; s < 12; ++s) losses.push_back(step.run(f.x, f.y, 0.05f));
  for (double l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "12 steps on one batch should fit it";
  const size_t params = f.model.context().grads.size();
  ASSERT_EQ(sync.ready.size(), 12u);
  for (const auto& order : sync.ready) {
    ASSERT_EQ(order.size(), params);
    for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(order[k], params - 1 - k) << "backward order";
  }
  // Each step: begin, then every gradient, then finish.
  ASSERT_EQ(sync.calls.size(), 12 * (params + 2));
  for (size_t s = 0; s < 12; ++s) {
    EXPECT_EQ(sync.calls[s * (params + 2)], "begin");
    EXPECT_EQ(sync.calls[s * (params + 2) + params + 1], "finish");
  }
}

TEST(TrainStep, TheWaitInFinishStepIsCommunicationNotCompute) {
  Fixture f;
  RecordingSync sync;
  TrainStep step(f.model, optim::SgdConfig{}, 0.0f, &sync);
  for (int s = 0; s < 3; ++s) {
    step.run(f.x, f.y, 0.05f);
    ASSERT_GT(sync.held.back(), 0.0);
    EXPECT_GE(step.last_times().comm_wait_seconds, sync.held.back()) << "step " << s;
    EXPECT_GT(step.last_times().compute_seconds, 0.0) << "step " << s;  // forward, backward and update ran
  }
}

TEST(TrainStep, EvaluationCountsEverySampleAndClampsTopFiveToTheClasses) {
  Fixture f;
  TrainStep step(f.model, optim::SgdConfig{}, 0.1f, nullptr);
  const TrainStep::EvalCounts c = step.evaluate(f.x, f.y);
  EXPECT_EQ(c.samples, kBatch);
  EXPECT_LE(c.top1, c.samples);
  EXPECT_EQ(c.top5, kBatch) << "with 4 classes every label is among the top 4";
  EXPECT_TRUE(std::isfinite(c.loss_sum));
  EXPECT_GT(c.loss_sum, 0.0);
}

}  // namespace
}  // namespace torus::worker::train

// Optimizer and schedule math, weight-decay mask; model shapes and parameter counts.
#include <gtest/gtest.h>

#include <cmath>

#include "common/util/error.h"
#include "tests/worker/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/nn/model.h"
#include "worker/optim/schedule.h"
#include "worker/optim/sgd.h"

namespace torus::worker {
namespace {

TEST(SgdMath, NesterovAndPlainMomentumStepsByHand) {
  float w = 1.0f, v = 0.5f;
  math::sgd_element(w, 0.2f, v, 0.1f, 0.9f, 0.01f, math::Nesterov::kOff);
  // g = 0.2 + 0.01 * 1 = 0.21; v = 0.45 + 0.21 = 0.66; w = 1 - 0.1 * 0.66
  EXPECT_FLOAT_EQ(v, 0.66f);
  EXPECT_FLOAT_EQ(w, 0.934f);
  w = 1.0f;
  v = 0.5f;
  math::sgd_element(w, 0.2f, v, 0.1f, 0.9f, 0.01f, math::Nesterov::kOn);
  // step = g + mu * v = 0.21 + 0.9 * 0.66 = 0.804
  EXPECT_FLOAT_EQ(w, 1.0f - 0.1f * 0.804f);
}

TEST(SgdMath, LabelSmoothingTargetsSumToOne) {
  float sum = 0;
  for (int k = 0; k < 10; ++k) sum += math::smoothed_target(k, 3, 0.1f, 10);
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_FLOAT_EQ(math::smoothed_target(3, 3, 0.1f, 10), 0.91f);
  EXPECT_FLOAT_EQ(math::smoothed_target(4, 3, 0.1f, 10), 0.01f);
}

TEST(Sgd, WeightDecayOnlyTouchesConvAndLinearWeights) {
  auto backend = cpu::make_cpu_backend(1);
  auto alloc = [&](size_t bytes) { return backend->allocate(bytes); };
  Arena params;
  params.add("conv.weight", ParamKind::kConvWeight, {4}, 4);
  params.add("bn.weight", ParamKind::kNormScale, {4}, 4);
  params.add("fc.bias", ParamKind::kBias, {4}, 4);
  params.allocate(alloc);
  Arena grads = params.mirror(alloc);  // zero gradients: only weight decay moves anything
  for (size_t i = 0; i < params.size(); ++i) backend->fill(params.view(i), 1.0f);
  optim::Sgd sgd(*backend, params, {0.0f, math::Nesterov::kOff, 0.5f});
  sgd.step(params, grads, 0.1f);
  EXPECT_FLOAT_EQ(params.view(0).f32()[0], 1.0f - 0.1f * 0.5f);
  EXPECT_FLOAT_EQ(params.view(1).f32()[0], 1.0f);
  EXPECT_FLOAT_EQ(params.view(2).f32()[0], 1.0f);
  optim::Sgd all(*backend, params, {0.0f, math::Nesterov::kOff, 0.5f, optim::DecayScope::kAll});
  all.step(params, grads, 0.1f);
  EXPECT_FLOAT_EQ(params.view(1).f32()[0], 0.95f);
}

TEST(Schedule, WarmupThenLinearDecay) {
  const auto s = optim::LrSchedule::warmup_then_linear_decay(0.2, 0.2, 4.0);
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(0.4), 0.1);
  EXPECT_DOUBLE_EQ(s.at(0.8), 0.2);
  EXPECT_NEAR(s.at(2.4), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(4.0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(9.0), 0.0);
}

TEST(Schedule, OneCycleAndSteps) {
  const auto one = optim::LrSchedule::one_cycle(1.0, 10, 0.3, 10, 100);
  EXPECT_DOUBLE_EQ(one.at(0), 0.1);
  EXPECT_DOUBLE_EQ(one.at(3), 1.0);
  EXPECT_DOUBLE_EQ(one.at(10), 0.01);
  // Two points at one epoch make a step (the TrainingJob's piecewise-linear convention).
  const optim::LrSchedule step({{0, 0.1}, {2, 0.1}, {2, 0.01}, {4, 0.01}});
  EXPECT_DOUBLE_EQ(step.at(1.99), 0.1);
  EXPECT_DOUBLE_EQ(step.at(2.0), 0.01);
  EXPECT_DOUBLE_EQ(step.at(3.0), 0.01);
}

TEST(Schedule, BadPointsAreRefusedNamingThePoint) {
  try {
    optim::LrSchedule({{0, 0.1}, {2, 0.2}, {1, 0.3}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("point 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(optim::LrSchedule({{0, -1.0}}), InvalidArgument);
}

// Parameter counts of torchvision's ResNets (ImageNet stem, 1000 classes): the architecture is the same.
TEST(Model, ResNetParameterCountsMatchTorchvision) {
  auto backend = cpu::make_cpu_backend(1);
  struct Case {
    api::Arch arch;
    int64_t params;
  };
  for (const Case& c : {Case{api::Arch::kResNet18, 11689512}, Case{api::Arch::kResNet34, 21797672},
                        Case{api::Arch::kResNet50, 25557032}}) {
    nn::ModelConfig cfg;
    cfg.arch = c.arch;
    cfg.stem = api::Stem::kImageNet;
    cfg.num_classes = 1000;
    cfg.head_pool = PoolKind::kAvg;
    cfg.batch_size = 2;
    cfg.image_size = 64;
    nn::Model model(*backend, cfg);
    EXPECT_EQ(model.parameter_count(), c.params) << api::to_string(c.arch);
  }
}

TEST(Model, ResNet9WidthsAndShapes) {
  auto backend = cpu::make_cpu_backend(1);
  nn::ModelConfig cfg;
  cfg.widths = {8, 16, 32, 64};
  cfg.in_channels = 1;
  cfg.batch_size = 4;
  cfg.image_size = 28;
  nn::Model model(*backend, cfg);
  EXPECT_EQ(model.parameter_count(), 103810);  // what PyTorch counts for the same net (bench peer)
  auto x = testing::random_vector(4 * 28 * 28, 1);
  Tensor logits = model.forward(Tensor(x.data(), {4, 28, 28, 1}), Mode::kTrain);
  EXPECT_EQ(logits.shape(), (Shape{4, 10}));
  for (float v : logits.span()) EXPECT_TRUE(std::isfinite(v));
  // Another batch and image size through the same model (progressive resizing).
  auto x2 = testing::random_vector(2 * 32 * 32, 2);
  EXPECT_EQ(model.forward(Tensor(x2.data(), {2, 32, 32, 1}), Mode::kEval).shape(), (Shape{2, 10}));
}

TEST(Model, ZeroInitResidualZeroesTheLastGammaOfEachBlock) {
  auto backend = cpu::make_cpu_backend(1);
  nn::ModelConfig cfg;
  cfg.arch = api::Arch::kResNet18;
  cfg.widths = {8, 8, 8, 8};
  cfg.batch_size = 2;
  cfg.image_size = 16;
  nn::Model model(*backend, cfg);
  int zeroed = 0;
  const Arena& params = model.context().params;
  for (size_t i = 0; i < params.size(); ++i) {
    const ArenaEntry& e = params.entry(i);
    if (e.kind != ParamKind::kNormScale) continue;
    const bool last_of_branch = e.name.find(".2.bn.weight") != std::string::npos;
    EXPECT_EQ(params.view(i).f32()[0], last_of_branch ? 0.0f : 1.0f) << e.name;
    zeroed += last_of_branch ? 1 : 0;
  }
  EXPECT_EQ(zeroed, 8);  // one per basic block
}

TEST(Model, InitIsDeterministicFromTheSeed) {
  auto backend = cpu::make_cpu_backend(1);
  nn::ModelConfig cfg;
  cfg.widths = {8, 16, 32, 64};
  cfg.seed = 42;
  nn::Model a(*backend, cfg), b(*backend, cfg);
  cfg.seed = 43;
  nn::Model c(*backend, cfg);
  const auto pa = nn::export_plain(a.context(), a.context().params);
  EXPECT_EQ(pa, nn::export_plain(b.context(), b.context().params));
  EXPECT_NE(pa, nn::export_plain(c.context(), c.context().params));
}

}  // namespace
}  // namespace torus::worker

// The ResNets' parameter counts and shapes, zero-initialized residual branches, and seeded initialization.
#include "worker/nn/model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/worker/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker {
namespace {

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

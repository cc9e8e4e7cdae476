// The SGD element update and label-smoothed targets (worker/backend/math.h, the formula every backend runs), and
// which parameters the optimizer decays.
#include "worker/optim/sgd.h"

#include <gtest/gtest.h>

#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/math.h"

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

}  // namespace
}  // namespace torus::worker

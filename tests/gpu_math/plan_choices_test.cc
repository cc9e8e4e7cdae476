// worker/backend/cuda/plan_choices.h on the CPU: the pooling mode each determinism setting gets, and how batch
// norm's backward goes through a fused ReLU when cuDNN refuses the fused backward.
#include "worker/backend/cuda/plan_choices.h"

#include <gtest/gtest.h>

namespace torus::worker::cuda {
namespace {

TEST(PlanChoices, DeterministicMaxPoolingUsesTheDeterministicMode) {
  EXPECT_EQ(pool_mode(PoolKind::kMax, Determinism::kRequired), PoolMode::kMaxDeterministic);
  EXPECT_EQ(pool_mode(PoolKind::kMax, Determinism::kAny), PoolMode::kMax);
}

TEST(PlanChoices, AveragePoolingIgnoresDeterminism) {
  EXPECT_EQ(pool_mode(PoolKind::kAvg, Determinism::kRequired), PoolMode::kAverageExcludePadding);
  EXPECT_EQ(pool_mode(PoolKind::kAvg, Determinism::kAny), PoolMode::kAverageExcludePadding);
}

TEST(PlanChoices, NormBackwardWithoutReluIsPlain) {
  for (BnFusion f : {BnFusion::kCudnn, BnFusion::kOff})
    for (FusedBackward b : {FusedBackward::kRan, FusedBackward::kRefused})
      EXPECT_EQ(norm_backward(Activation::kNone, f, b), NormBackward::kPlain);
}

TEST(PlanChoices, NormBackwardUsesTheMaskAfterAnUnfusedForward) {
  EXPECT_EQ(norm_backward(Activation::kRelu, BnFusion::kOff, FusedBackward::kRefused), NormBackward::kReluFromMask);
}

TEST(PlanChoices, RefusedFusedBackwardFallsBackToTheForwardsOutput) {
  // The fused forward wrote cuDNN's reserve space, not a mask: the ReLU's gradient comes from y.
  EXPECT_EQ(norm_backward(Activation::kRelu, BnFusion::kCudnn, FusedBackward::kRefused),
            NormBackward::kReluFromOutput);
  EXPECT_EQ(norm_backward(Activation::kRelu, BnFusion::kCudnn, FusedBackward::kRan), NormBackward::kFused);
}

}  // namespace
}  // namespace torus::worker::cuda

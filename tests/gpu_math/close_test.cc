// tests/support/close.h, the comparison of the GPU op tests (tests/gpu), on the CPU: non-finite reference values
// compare by equality and stay out of the tolerance's scale.
#include "tests/support/close.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "worker/backend/cuda/kernel_math.h"

namespace torus::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// What GpuTest.ConversionsRunTheSharedFormulas compares: 70000 overflows fp16 to inf, at tolerance 0.
TEST(CompareClose, AnFp16OverflowToInfinityEqualsItself) {
  namespace km = worker::cuda::kmath;
  const std::vector<float> x = {70000.0f, 1e-7f, 3.14159f, -1000.0f};
  std::vector<float> want;
  for (float v : x) want.push_back(km::float_from_f16(km::f16_from_float(v)));
  ASSERT_TRUE(std::isinf(want[0]));
  const CloseReport r = compare_close(want, want, 0.0);
  EXPECT_EQ(r.bad, 0u);
  EXPECT_EQ(r.tolerance, 0.0);  // 0 x the largest finite magnitude, not 0 x inf
}

TEST(CompareClose, InfinityMustMatchInSign) {
  EXPECT_EQ(compare_close({-kInf, 1.0f}, {kInf, 1.0f}, 1e-3).bad, 1u);
  EXPECT_EQ(compare_close({65504.0f, 1.0f}, {kInf, 1.0f}, 1e-3).bad, 1u);  // the largest finite fp16 is not inf
  EXPECT_EQ(compare_close({kInf, 1.0f}, {kInf, 1.0f}, 1e-3).bad, 0u);
}

TEST(CompareClose, NanMatchesOnlyNan) {
  EXPECT_EQ(compare_close({kNaN, 2.0f}, {kNaN, 2.0f}, 0.0).bad, 0u);
  const CloseReport r = compare_close({1.0f, kNaN}, {1.0f, 2.0f}, 1e-2);
  EXPECT_EQ(r.bad, 1u);
  EXPECT_EQ(r.first, 1u);
  EXPECT_EQ(compare_close({1.0f, kInf}, {1.0f, 2.0f}, 1e-2).bad, 1u);  // a finite reference refuses inf
}

TEST(CompareClose, ToleranceIsRelativeToTheLargestFiniteMagnitude) {
  // Scale 100 (the inf is left out): 1e-2 x 100 = 1 absolute.
  const CloseReport r = compare_close({0.9f, 100.5f, kInf, 2.5f}, {0.0f, 100.0f, kInf, 1.0f}, 1e-2);
  EXPECT_DOUBLE_EQ(r.tolerance, 1.0);
  EXPECT_EQ(r.bad, 1u);
  EXPECT_EQ(r.first, 3u);  // 2.5 vs 1.0 is 1.5 away
}

}  // namespace
}  // namespace torus::test

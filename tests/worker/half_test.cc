// fp32 <-> fp16 / bf16 (worker/backend/half.h), the formula the CUDA kernels and the CPU all-reduce's compression
// both run, against independent references.
#include "worker/backend/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace torus::worker::math {
namespace {

// Floats that stress rounding: random bit patterns of every exponent, plus the special values.
std::vector<float> probe_floats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          65536.0f,
                          1e-8f,
                          5.96e-8f,
                          2.98023224e-8f,
                          6.1e-5f,
                          3.0e38f,
                          3.4028235e38f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::denorm_min(),
                          1.17549435e-38f};
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) v.push_back(bits_float(rng()));
  return v;
}

// bf16 reference: round to 8 significant bits in double with ties to even (bf16 shares fp32's exponent range,
// so below 2^-126 the spacing stays 2^-133).
float bf16_reference(float f) {
  if (std::isinf(f) || f == 0.0f) return f;
  int e = 0;
  std::frexp(static_cast<double>(f), &e);
  const double ulp = std::ldexp(1.0, std::max(e, -125) - 8);
  const double r = std::nearbyint(static_cast<double>(f) / ulp) * ulp;
  if (std::fabs(r) > 3.3895313892515355e38) return std::copysign(std::numeric_limits<float>::infinity(), f);
  return static_cast<float>(r);
}

TEST(Half, Bf16RoundsToNearestEvenLikeAnIndependentReference) {
  for (float f : probe_floats()) {
    const float got = float_from_bf16(bf16_from_float(f));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(float_bits(got), float_bits(bf16_reference(f))) << "f = " << f;
  }
}

TEST(Half, F16MatchesTheCompilersFloat16Conversion) {
  for (float f : probe_floats()) {
    const uint16_t ours = f16_from_float(f);
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits = 0;
    std::memcpy(&ref_bits, &ref, sizeof ref_bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(float_from_f16(ours)));
      continue;
    }
    ASSERT_EQ(ours, ref_bits) << "f = " << f;
  }
}

TEST(Half, EveryF16ValueWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    _Float16 ref;
    std::memcpy(&ref, &bits, sizeof ref);
    const float wide = float_from_f16(bits);
    if (std::isnan(static_cast<float>(ref))) {
      EXPECT_TRUE(std::isnan(wide));
      continue;
    }
    ASSERT_EQ(float_bits(wide), float_bits(static_cast<float>(ref))) << "half bits " << h;
    ASSERT_EQ(f16_from_float(wide), bits) << "half bits " << h;
  }
}

TEST(Half, RoundTripsRepresentableValuesAndRoundsToNearest) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    EXPECT_EQ(float_from_f16(f16_from_float(f)), f) << f;
  EXPECT_TRUE(std::isinf(float_from_f16(f16_from_float(1e6f))));
  EXPECT_TRUE(std::isnan(float_from_f16(f16_from_float(NAN))));
  EXPECT_EQ(float_from_f16(f16_from_float(1.0f + 1.0f / 4096)), 1.0f);  // halfway rounds to even
  for (float f : {1.0f, -3.0f, 1.5f, 0x1p100f, -0x1.8p-100f})
    EXPECT_EQ(float_from_bf16(bf16_from_float(f)), f) << f;
  EXPECT_NEAR(float_from_bf16(bf16_from_float(3.14159f)), 3.14159f, 0.01f);
}

}  // namespace
}  // namespace torus::worker::math

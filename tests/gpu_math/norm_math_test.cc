// The NHWC batch norm kernels' formulas (norm_math.h), run on the CPU the way norm_kernels.cu runs them (rows
// folded per thread, lanes and row slices merged in order), against double-precision references.
#include "worker/backend/cuda/norm_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace torus::worker::cuda::kmath {
namespace {

struct Reference {
  double mean = 0, var = 0;  // biased
};
Reference reference(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += x;
  Reference r;
  r.mean = sum / static_cast<double>(v.size());
  for (float x : v) r.var += (x - r.mean) * (x - r.mean);
  r.var /= static_cast<double>(v.size());
  return r;
}

// One channel's moments as the kernels compute them: thread (lane y, slice s) folds rows s * 8 + y + k * 8 * slices,
// the block merges its 8 lanes in order into the slice's partial; the finalize's lanes merge the slices
// (lane_moments), and lane 0 the lanes in order. `c` channels of partials, this one the last (its stride matters).
Moments kernel_order(const std::vector<float>& v, int64_t slices, int64_t c = 3) {
  const auto m = static_cast<int64_t>(v.size());
  std::vector<Moments> partial(static_cast<size_t>(slices * c));
  for (int64_t s = 0; s < slices; ++s) {
    Moments block;
    for (int y = 0; y < kBnRowsPerBlock; ++y) {
      Moments lane;
      for (int64_t r = s * kBnRowsPerBlock + y; r < m; r += slices * kBnRowsPerBlock)
        moments_push(lane, v[static_cast<size_t>(r)]);
      block = moments_merge(block, lane);
    }
    partial[static_cast<size_t>(s * c + c - 1)] = block;
  }
  Moments total;
  for (int lane = 0; lane < kBnFinalizeLanes; ++lane)
    total = moments_merge(total, lane_moments(partial.data(), slices, c, c - 1, lane));
  return total;
}

std::vector<float> normal_values(size_t n, double mean, double stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng));
  return v;
}

TEST(NormMath, MomentsInKernelOrderMatchTwoPassDoubles) {
  for (int64_t m : {1, 2, 7, 100, 1000, 100000}) {
    const auto v = normal_values(static_cast<size_t>(m), 0.3, 2.0, static_cast<unsigned>(m));
    const Reference want = reference(v);
    for (int64_t slices : {int64_t{1}, int64_t{3}, bn_row_slices(m, 64)}) {
      const Moments got = kernel_order(v, slices);
      EXPECT_EQ(got.n, m);
      EXPECT_NEAR(got.mean, want.mean, 1e-5 * (1 + std::abs(want.mean))) << m << " rows, " << slices << " slices";
      EXPECT_NEAR(biased_var(got), want.var, 1e-4 * want.var + 1e-6) << m << " rows, " << slices << " slices";
    }
  }
}

TEST(NormMath, TheFinalizeLanesTakeEverySliceOnce) {
  // Slice s holds s + 1 rows of value s: the merged count and mean show a slice missed or taken twice.
  for (int64_t slices : {1, 2, 15, 16, 17, 512, 1000}) {
    const int64_t c = 5, ch = 2;
    std::vector<Moments> partial(static_cast<size_t>(slices * c), Moments{1000, 1e6f, 0.0f});  // other channels
    std::vector<Sums> sums(partial.size(), Sums{1e6f, 1e6f});
    for (int64_t s = 0; s < slices; ++s) {
      partial[static_cast<size_t>(s * c + ch)] = Moments{s + 1, static_cast<float>(s), 0.0f};
      sums[static_cast<size_t>(s * c + ch)] = Sums{static_cast<float>(s), 1.0f};
    }
    Moments total;
    Sums sum;
    for (int lane = 0; lane < kBnFinalizeLanes; ++lane) {
      total = moments_merge(total, lane_moments(partial.data(), slices, c, ch, lane));
      sum = sums_add(sum, lane_sums(sums.data(), slices, c, ch, lane));
    }
    double rows = 0, weighted = 0;
    for (int64_t s = 0; s < slices; ++s) {
      rows += static_cast<double>(s + 1);
      weighted += static_cast<double>(s) * static_cast<double>(s + 1);
    }
    EXPECT_EQ(total.n, static_cast<int64_t>(rows)) << slices << " slices";
    EXPECT_NEAR(total.mean, weighted / rows, 1e-4 * (1 + weighted / rows)) << slices << " slices";
    EXPECT_FLOAT_EQ(sum.dy, static_cast<float>(slices * (slices - 1) / 2)) << slices << " slices";
    EXPECT_FLOAT_EQ(sum.dy_xmu, static_cast<float>(slices)) << slices << " slices";
  }
}

TEST(NormMath, ALargeMeanWithASmallSpreadKeepsItsVariance) {
  // sum(x^2) / m - mean^2 in fp32 would lose every digit here; Welford and Chan's merge do not.
  const auto v = normal_values(50000, 1000.0, 0.01, 3);
  const Reference want = reference(v);
  const Moments got = kernel_order(v, bn_row_slices(50000, 32));
  EXPECT_NEAR(biased_var(got), want.var, 0.02 * want.var);
  // And the normalized values are exact to fp32's rounding of x (centering before scaling).
  const Affine f = bn_affine_of(got.mean, biased_var(got), 1e-5f, 1.0f, 0.0f);
  for (size_t i = 0; i < 100; ++i) {
    const double exact = (v[i] - want.mean) / std::sqrt(want.var + 1e-5);
    EXPECT_NEAR(bn_apply(f, v[i]), exact, 0.05) << i;
  }
}

TEST(NormMath, MergingAnEmptySetChangesNothing) {
  Moments a;
  for (float x : {1.0f, 2.0f, 4.0f}) moments_push(a, x);
  for (const Moments& r : {moments_merge(a, Moments{}), moments_merge(Moments{}, a)}) {
    EXPECT_EQ(r.n, a.n);
    EXPECT_EQ(r.mean, a.mean);
    EXPECT_EQ(r.m2, a.m2);
  }
  EXPECT_FLOAT_EQ(unbiased_var(a), biased_var(a) * 3.0f / 2.0f);
  Moments one;
  moments_push(one, 5.0f);
  EXPECT_EQ(unbiased_var(one), 0.0f);  // one row: no unbiased estimate, the biased 0 stands in
}

TEST(NormMath, ForwardAppliesGammaAndBetaToTheNormalizedValue) {
  const Affine f = bn_affine_of(2.0f, 4.0f, 0.0f, 3.0f, -1.0f);
  EXPECT_FLOAT_EQ(bn_apply(f, 2.0f), -1.0f);
  EXPECT_FLOAT_EQ(bn_apply(f, 4.0f), 3.0f * 1.0f - 1.0f);  // (4 - 2) / 2 = 1 standard deviation
  EXPECT_FLOAT_EQ(bn_apply(f, 0.0f), 3.0f * -1.0f - 1.0f);
}

TEST(NormMath, BackwardMatchesTheDoublePrecisionGradient) {
  const int64_t m = 3000;
  const auto x = normal_values(m, 0.5, 1.5, 11), dy = normal_values(m, 0.1, 1.0, 12);
  const float gamma = 0.7f, eps = 1e-5f;
  const Reference r = reference(x);
  const double invstd = 1.0 / std::sqrt(r.var + eps);
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t i = 0; i < m; ++i) {
    sum_dy += dy[static_cast<size_t>(i)];
    sum_dy_xhat += dy[static_cast<size_t>(i)] * (x[static_cast<size_t>(i)] - r.mean) * invstd;
  }
  // The kernels' sums: fp32, per thread, then merged.
  float s1 = 0, s2 = 0;
  for (int64_t i = 0; i < m; ++i) {
    s1 += dy[static_cast<size_t>(i)];
    s2 += dy[static_cast<size_t>(i)] * (x[static_cast<size_t>(i)] - static_cast<float>(r.mean));
  }
  const auto k = bn_backward_coefficients(s1, s2, static_cast<float>(r.mean), static_cast<float>(invstd), gamma,
                                          static_cast<float>(m));
  EXPECT_NEAR(k.dbeta, sum_dy, 1e-3 * std::abs(sum_dy) + 1e-2);
  EXPECT_NEAR(k.dgamma, sum_dy_xhat, 1e-3 * std::abs(sum_dy_xhat) + 1e-2);
  for (int64_t i = 0; i < m; i += 97) {
    const double xhat = (x[static_cast<size_t>(i)] - r.mean) * invstd;
    const double want = gamma * invstd * (dy[static_cast<size_t>(i)] - sum_dy / m - xhat * sum_dy_xhat / m);
    EXPECT_NEAR(bn_backward_dx(k, x[static_cast<size_t>(i)], dy[static_cast<size_t>(i)]), want, 1e-4) << i;
  }
}

// The normalize pass's ReLU mask, written as bn_apply_relu_mask_kernel writes it: warp (row r, tile t) ballots its
// 32 lanes' y > 0 into word bn_mask_word(r, c, t). Every mask word is written once, and every element's bit is what
// the ReLU backward reads for it (mask_bit of word i / 32), as the separate ReLU-with-mask kernel lays it out.
TEST(NormMath, TheNormalizePassWritesEachElementsReluBitOnce) {
  EXPECT_TRUE(bn_apply_writes_mask(32));
  EXPECT_TRUE(bn_apply_writes_mask(2048));
  for (int64_t c : {8, 16, 48, 100}) EXPECT_FALSE(bn_apply_writes_mask(c)) << c;  // the separate kernel's widths
  std::mt19937 rng(5);
  for (int64_t c : {32, 64, 96, 512}) {
    const int64_t m = 37;
    std::vector<float> y(static_cast<size_t>(m * c));
    for (float& v : y) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);  // zeros too: y > 0, not y >= 0
    std::vector<uint32_t> mask(static_cast<size_t>(mask_words(m * c)), 0xdeadbeefu);
    std::vector<int> writes(mask.size(), 0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t t = 0; t < bn_channel_tiles(c); ++t) {
        uint32_t bits = 0;  // __ballot_sync: lane L's predicate is bit L
        for (int lane = 0; lane < kBnLanes; ++lane)
          if (y[static_cast<size_t>(r * c + t * kBnLanes + lane)] > 0.0f) bits |= 1u << lane;
        const int64_t w = bn_mask_word(r, c, t);
        ASSERT_LT(w, static_cast<int64_t>(mask.size()));
        mask[static_cast<size_t>(w)] = bits;
        writes[static_cast<size_t>(w)] += 1;
      }
    for (int n : writes) ASSERT_EQ(n, 1) << c;
    for (int64_t i = 0; i < m * c; ++i)
      ASSERT_EQ(mask_bit(mask[static_cast<size_t>(i / 32)], i), y[static_cast<size_t>(i)] > 0.0f) << c << " " << i;
  }
}

// The BN + ReLU backward reading dy through the mask (through_relu_mask) gives the double-precision gradient of
// relu(bn(x)) with respect to x: the mask zeroes the gradient where the ReLU was off, and both sums see only the rest.
TEST(NormMath, BackwardThroughTheReluMaskMatchesTheDoublePrecisionGradient) {
  const int64_t m = 2000;
  const auto x = normal_values(m, 0.3, 1.2, 21), dy = normal_values(m, 0.0, 1.0, 22);
  const float gamma = 1.3f, beta = 0.2f, eps = 1e-5f;
  const Reference r = reference(x);
  const double invstd = 1.0 / std::sqrt(r.var + eps);
  std::vector<uint32_t> mask(static_cast<size_t>(mask_words(m)), 0u);
  for (int64_t i = 0; i < m; ++i)
    if (gamma * (x[static_cast<size_t>(i)] - r.mean) * invstd + beta > 0)
      mask[static_cast<size_t>(i / 32)] |= 1u << (i % 32);
  double sum_g = 0, sum_g_xhat = 0;  // g: dy where the ReLU was on
  float s1 = 0, s2 = 0;
  for (int64_t i = 0; i < m; ++i) {
    const double xhat = (x[static_cast<size_t>(i)] - r.mean) * invstd;
    const bool on = gamma * xhat + beta > 0;
    sum_g += on ? dy[static_cast<size_t>(i)] : 0.0;
    sum_g_xhat += on ? dy[static_cast<size_t>(i)] * xhat : 0.0;
    const float g = through_relu_mask(mask.data(), i, dy[static_cast<size_t>(i)]);
    EXPECT_EQ(g, on ? dy[static_cast<size_t>(i)] : 0.0f) << i;
    s1 += g;
    s2 += g * (x[static_cast<size_t>(i)] - static_cast<float>(r.mean));
  }
  const auto k = bn_backward_coefficients(s1, s2, static_cast<float>(r.mean), static_cast<float>(invstd), gamma,
                                          static_cast<float>(m));
  EXPECT_NEAR(k.dbeta, sum_g, 1e-3 * std::abs(sum_g) + 1e-2);
  EXPECT_NEAR(k.dgamma, sum_g_xhat, 1e-3 * std::abs(sum_g_xhat) + 1e-2);
  for (int64_t i = 0; i < m; i += 37) {
    const double xhat = (x[static_cast<size_t>(i)] - r.mean) * invstd;
    const double g = gamma * xhat + beta > 0 ? dy[static_cast<size_t>(i)] : 0.0;
    const double want = gamma * invstd * (g - sum_g / m - xhat * sum_g_xhat / m);
    const float got =
        bn_backward_dx(k, x[static_cast<size_t>(i)], through_relu_mask(mask.data(), i, dy[static_cast<size_t>(i)]));
    EXPECT_NEAR(got, want, 1e-4) << i;
  }
  // No mask: no ReLU, dy as it is.
  EXPECT_EQ(through_relu_mask(nullptr, 5, -2.5f), -2.5f);
}

TEST(NormMath, TheGridFillsTheGpuAndGivesEveryThreadRows) {
  EXPECT_EQ(bn_channel_tiles(1), 1);
  EXPECT_EQ(bn_channel_tiles(32), 1);
  EXPECT_EQ(bn_channel_tiles(33), 2);
  EXPECT_EQ(bn_row_slices(1, 8), 1);
  EXPECT_EQ(bn_row_slices(128, 8), 1);  // 128 rows: one slice of 8 lanes x 16 rows
  EXPECT_EQ(bn_row_slices(129, 8), 2);
  for (int64_t c : {3, 64, 256, 2048, 100000}) {
    for (int64_t m : {int64_t{1}, int64_t{6272}, int64_t{401408}, int64_t{1} << 24}) {
      const int64_t slices = bn_row_slices(m, c);
      EXPECT_GE(slices, 1);
      EXPECT_LE(slices, 65535) << "gridDim.y";
      EXPECT_LE(slices * bn_channel_tiles(c), std::max<int64_t>(kBnTargetBlocks, bn_channel_tiles(c)));
      if (slices > 1) {
        EXPECT_GE(m, (slices - 1) * kBnRowsPerBlock * kBnMinRowsPerThread) << m << " " << c;
      }
    }
  }
  EXPECT_TRUE(bn_rows_supported(1));
  EXPECT_TRUE(bn_rows_supported((int64_t{1} << 24) + 1));
  EXPECT_TRUE(bn_rows_supported(int64_t{1} << 33));
  EXPECT_FALSE(bn_rows_supported(0));
}

// Past 2^24 rows an fp32 count stops growing (2^24 + 1 rounds to 2^24): each later value would be weighed as if it
// were the first of the next 2^24. The integer count keeps pushes and merges exact.
TEST(NormMath, CountsStayExactPastTwoToTheTwentyFour) {
  const int64_t big = int64_t{1} << 24;
  Moments a{big, 1.0f, 0.0f};
  moments_push(a, 1.0f);
  EXPECT_EQ(a.n, big + 1);
  EXPECT_EQ(a.mean, 1.0f);
  // Two halves of 2^25 rows, the second with mean 3: the merged mean is 2 and the variance 1 (each value 1 or 3).
  const Moments merged = moments_merge(Moments{big, 1.0f, 0.0f}, Moments{big, 3.0f, 0.0f});
  EXPECT_EQ(merged.n, 2 * big);
  EXPECT_FLOAT_EQ(merged.mean, 2.0f);
  EXPECT_FLOAT_EQ(biased_var(merged), 1.0f);
  // A thread folding 2^24 + 1000 rows in the kernels' order: all of them counted, the mean of a ramp exact enough.
  Moments lane;
  for (int64_t r = 0; r < big + 1000; ++r) moments_push(lane, r < big ? 0.0f : 1.0f);
  EXPECT_EQ(lane.n, big + 1000);
  EXPECT_NEAR(lane.mean, 1000.0 / static_cast<double>(big + 1000), 1e-7);
}

}  // namespace
}  // namespace torus::worker::cuda::kmath

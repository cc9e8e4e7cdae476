// The formulas the CUDA kernels execute (kernel_math.h), run on the CPU against independent references.
#include "worker/backend/cuda/kernel_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace torus::worker::cuda::kmath {
namespace {

TEST(KernelMath, FiniteTestSeesInfAndNan) {
  EXPECT_TRUE(is_finite(3.0f));
  EXPECT_TRUE(is_finite(-std::numeric_limits<float>::max()));
  EXPECT_FALSE(is_finite(std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(is_finite(-std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(is_finite(std::numeric_limits<float>::quiet_NaN()));
}

TEST(KernelMath, ReluAddAndTheirGradients) {
  EXPECT_EQ(relu(-2.0f), 0.0f);
  EXPECT_EQ(relu(2.5f), 2.5f);
  EXPECT_EQ(relu_grad(0.0f, 7.0f), 0.0f);  // an output of exactly 0 passes no gradient (PyTorch's convention)
  EXPECT_EQ(relu_grad(1.0f, 7.0f), 7.0f);
  EXPECT_EQ(add_act(1.0f, -3.0f, true), 0.0f);
  EXPECT_EQ(add_act(1.0f, -3.0f, false), -2.0f);
}

TEST(KernelMath, VarianceAndInverseStdRoundTrip) {
  const float eps = 1e-5f;
  for (float var : {0.0f, 1e-6f, 0.01f, 1.0f, 37.5f, 1e4f}) {
    const float invstd = invstd_from_var(var, eps);
    EXPECT_NEAR(invstd, 1.0 / std::sqrt(static_cast<double>(var) + eps), 1e-6 * invstd);
    const float back = var_from_invstd(invstd, eps);
    EXPECT_NEAR(back, var, 1e-6 * (var + eps) * 4) << var;
    EXPECT_NEAR(invstd_from_var(back, eps), invstd, 1e-6 * invstd);  // the backward sees the forward's invstd
  }
}

// The kernel's row composition (max, log-sum-exp, per-class term and gradient) against double precision.
TEST(KernelMath, SoftmaxCrossEntropyRowMatchesDoublePrecision) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int k = 37, n = 8;
  const float smoothing = 0.1f, scale = 1024.0f;
  for (int row = 0; row < n; ++row) {
    std::vector<float> z(k);
    for (float& v : z) v = normal(rng);
    const int label = row * 5 % k;
    float zmax = -INFINITY, sum = 0.0f, loss = 0.0f;
    for (float v : z) zmax = std::max(zmax, v);
    for (float v : z) sum += std::exp(v - zmax);
    const float log_sum = std::log(sum);
    std::vector<float> grad(k);
    for (int j = 0; j < k; ++j) {
      const float lp = log_prob(z[j], zmax, log_sum);
      loss += xent_term(lp, j, label, smoothing, k);
      grad[j] = xent_grad(lp, j, label, smoothing, k, 1.0f / n, scale);
    }
    double ref_sum = 0;
    for (float v : z) ref_sum += std::exp(static_cast<double>(v));
    double ref_loss = 0, grad_total = 0;
    for (int j = 0; j < k; ++j) {
      const double p = std::exp(static_cast<double>(z[j])) / ref_sum;
      const double t = (j == label ? 1.0 - smoothing : 0.0) + smoothing / k;
      ref_loss -= t * std::log(p);
      EXPECT_NEAR(grad[j], (p - t) / n * scale, 1e-5 * scale);
      grad_total += grad[j];
    }
    EXPECT_NEAR(loss, ref_loss, 1e-4 * std::max(1.0, ref_loss));
    EXPECT_NEAR(grad_total, 0.0, 1e-4 * scale);  // softmax gradients sum to zero
  }
}

TEST(KernelMath, TopKTiesCountAgainstTheLabel) {
  const std::vector<float> z = {0.5f, 0.5f, 0.5f, 0.1f};
  auto above = [&](int label) {
    int n = 0;
    for (int j = 0; j < 4; ++j) n += ranks_above(z[j], j, z[label], label) ? 1 : 0;
    return n;
  };
  EXPECT_EQ(above(0), 0);
  EXPECT_EQ(above(2), 2);  // the two earlier ties rank above
  EXPECT_EQ(above(3), 3);
}

TEST(LossScaler, GrowsAfterTheIntervalAndBacksOffOnOverflow) {
  LossScaleConfig c;
  c.init_scale = 1024.0f;
  c.growth_interval = 3;
  LossScaleState s = loss_scale_initial(c);
  for (int i = 0; i < 2; ++i) loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 1024.0f);
  EXPECT_EQ(s.good_steps, 2);
  loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 2048.0f);
  EXPECT_EQ(s.good_steps, 0);
  s.found_inf = 1;
  loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 1024.0f);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.found_inf, 0);  // cleared for the next step
  EXPECT_EQ(s.good_steps, 0);
}

TEST(LossScaler, StaysWithinItsBounds) {
  LossScaleConfig c;
  c.init_scale = 2.0f;
  c.min_scale = 1.0f;
  c.max_scale = 8.0f;
  c.growth_interval = 1;
  LossScaleState s = loss_scale_initial(c);
  for (int i = 0; i < 10; ++i) loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 8.0f);
  for (int i = 0; i < 10; ++i) {
    s.found_inf = 1;
    loss_scale_update(s, c);
  }
  EXPECT_EQ(s.scale, 1.0f);
  EXPECT_EQ(s.skipped, 10);
}

TEST(LossScaler, UnscaleDividesAndFlagsNonFinite) {
  int32_t found = 0;
  EXPECT_EQ(unscale(512.0f, 1.0f / 256.0f, found), 2.0f);
  EXPECT_EQ(found, 0);
  (void)unscale(std::numeric_limits<float>::infinity(), 1.0f / 256.0f, found);
  EXPECT_EQ(found, 1);
  (void)unscale(1.0f, 1.0f / 256.0f, found);
  EXPECT_EQ(found, 1);  // a flag only ever goes up within a step
  int32_t nan_found = 0;
  (void)unscale(std::numeric_limits<float>::quiet_NaN(), 1.0f, nan_found);
  EXPECT_EQ(nan_found, 1);
}

TEST(Augment, DrawsStayInRangeAndDependOnlyOnSeedAndSample) {
  std::set<int> dys, dxs;
  int flips = 0;
  const int samples = 4000, shift = 2;
  for (int i = 0; i < samples; ++i) {
    const SampleAugment a = sample_augment(11, static_cast<uint64_t>(i), shift, true);
    ASSERT_GE(a.dy, -shift);
    ASSERT_LE(a.dy, shift);
    ASSERT_GE(a.dx, -shift);
    ASSERT_LE(a.dx, shift);
    dys.insert(a.dy);
    dxs.insert(a.dx);
    flips += a.flip;
    const SampleAugment again = sample_augment(11, static_cast<uint64_t>(i), shift, true);
    ASSERT_EQ(again.dy, a.dy);
    ASSERT_EQ(again.dx, a.dx);
    ASSERT_EQ(again.flip, a.flip);
  }
  EXPECT_EQ(dys.size(), 5u);
  EXPECT_EQ(dxs.size(), 5u);
  EXPECT_NEAR(flips, samples / 2, samples / 10);
  EXPECT_EQ(sample_augment(11, 5, shift, false).flip, 0);
}

TEST(Augment, SourcePixelTranslatesFlipsAndPads) {
  int32_t sy = 0, sx = 0;
  const SampleAugment identity;
  ASSERT_TRUE(source_pixel(3, 4, 8, 8, identity, sy, sx));
  EXPECT_EQ(sy, 3);
  EXPECT_EQ(sx, 4);
  SampleAugment flip;
  flip.flip = 1;
  ASSERT_TRUE(source_pixel(3, 0, 8, 8, flip, sy, sx));
  EXPECT_EQ(sx, 7);
  SampleAugment shifted;
  shifted.dy = -2;
  shifted.dx = 1;
  EXPECT_FALSE(source_pixel(1, 0, 8, 8, shifted, sy, sx));  // row -1: padding
  ASSERT_TRUE(source_pixel(2, 0, 8, 8, shifted, sy, sx));
  EXPECT_EQ(sy, 0);
  EXPECT_EQ(sx, 1);
  EXPECT_FALSE(source_pixel(2, 7, 8, 8, shifted, sy, sx));  // column 8: padding
}

TEST(Augment, NormalizeMatchesTheFormula) {
  EXPECT_NEAR(normalize_pixel(255, 0.5f, 4.0f), 2.0f, 1e-6);
  EXPECT_NEAR(normalize_pixel(0, 0.4914f, 1.0f / 0.247f), -0.4914 / 0.247, 1e-5);
}

TEST(Augment, AugmentedValueReadsTheShiftedPixelAndPadsWithPixelZero) {
  const int32_t h = 4, w = 3, c = 2;
  uint8_t image[h * w * c];
  for (int i = 0; i < h * w * c; ++i) image[i] = static_cast<uint8_t>(10 + 7 * i);
  AugmentSpec spec;
  spec.mean[0] = 0.25f;
  spec.mean[1] = 0.5f;
  spec.inv_std[0] = 2.0f;
  spec.inv_std[1] = 4.0f;
  SampleAugment a;
  a.dy = 1;
  a.dx = -1;
  // Output (0, 1) reads source (1, 0); output (0, 0) reads column -1: padding, i.e. pixel 0 normalized.
  EXPECT_EQ(augmented_value(image, 0, 1, 1, h, w, c, a, spec), normalize_pixel(image[(1 * w + 0) * c + 1], 0.5f, 4.0f));
  EXPECT_EQ(augmented_value(image, 0, 0, 0, h, w, c, a, spec), normalize_pixel(0, 0.25f, 2.0f));
  EXPECT_EQ(augmented_value(image, 3, 2, 1, h, w, c, a, spec), normalize_pixel(0, 0.5f, 4.0f));  // row 4
}

// The fused SGD as its kernel runs it (block b = chunk b, thread t striding by the block size) against the update of
// each tensor on its own: identical values, every element of every tensor updated once, the gaps untouched.
TEST(FusedSgd, ChunksUpdateEveryTensorOnceWithItsWeightDecay) {
  const std::vector<SgdSegment> segments = {{0, 5, 0.1f}, {16, 40000, 0.0f}, {40016, 3, 0.5f}, {40032, 16384, 0.1f}};
  const std::vector<SgdChunk> chunks = sgd_chunks(segments, kSgdChunkElements);
  ASSERT_EQ(chunks.size(), 1u + 3u + 1u + 1u) << "40000 elements take 3 chunks of at most 16384";
  EXPECT_EQ(chunks[1].elements, kSgdChunkElements);
  EXPECT_EQ(chunks[3].offset, 16 + 2 * kSgdChunkElements);
  EXPECT_EQ(chunks[3].elements, 40000 - 2 * kSgdChunkElements);
  const size_t n = 40032 + 16384 + 16;
  std::vector<float> w(n), g(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    g[i] = 0.003f * static_cast<float>(i % 31) - 0.05f;
    v[i] = 0.002f * static_cast<float>(i % 13);
  }
  std::vector<float> want_w = w, want_v = v;
  for (const SgdSegment& s : segments)
    for (int64_t i = s.offset; i < s.offset + s.elements; ++i)
      math::sgd_element(want_w[static_cast<size_t>(i)], g[static_cast<size_t>(i)], want_v[static_cast<size_t>(i)], 0.1f,
                        0.9f, s.weight_decay, math::Nesterov::kOn);
  const int32_t block = 256;
  for (const SgdChunk& c : chunks)
    for (int32_t t = 0; t < block; ++t)
      for (int32_t i = t; i < c.elements; i += block)
        sgd_chunk_element(c, i, w.data(), g.data(), v.data(), 0.1f, 0.9f, math::Nesterov::kOn);
  EXPECT_EQ(w, want_w);
  EXPECT_EQ(v, want_v);
}

TEST(LaunchGeometry, GridStrideBlocksCoverEveryElementWithinTheCap) {
  EXPECT_EQ(grid_blocks(0, 256, 1000), 1u);  // a launch never has 0 blocks
  EXPECT_EQ(grid_blocks(1, 256, 1000), 1u);
  EXPECT_EQ(grid_blocks(256, 256, 1000), 1u);
  EXPECT_EQ(grid_blocks(257, 256, 1000), 2u);
  EXPECT_EQ(grid_blocks(int64_t{1} << 40, 256, 524280), 524280u);  // 2^40 elements: capped, the loop strides
  for (int64_t n = 1; n < 5000; n += 37) {
    const int64_t b = grid_blocks(n, 128, 1 << 20);
    EXPECT_GE(b * 128, n);
    EXPECT_LT((b - 1) * 128, n);
  }
}

TEST(LaunchGeometry, OneWarpPerRowReachesTheLastRow) {
  for (int64_t rows = 1; rows < 3000; rows += 7) {
    const int64_t blocks = warp_per_row_blocks(rows, 256);
    const int64_t warps = blocks * 256 / 32;
    EXPECT_GE(warps, rows) << rows;
    EXPECT_LT(warps - 256 / 32, rows) << rows;  // no block without a row
  }
}

TEST(LaunchGeometry, AlignUp) {
  EXPECT_EQ(align_up(0, 256), 0u);
  EXPECT_EQ(align_up(1, 256), 256u);
  EXPECT_EQ(align_up(256, 256), 256u);
  EXPECT_EQ(align_up(3073, 256), 3328u);
}

TEST(Indexing, ConvWeightLayoutsAreTheDenseOrders) {
  const int64_t o_n = 3, i_n = 5, kh = 2, kw = 3;
  // Counting in each layout's loop order is an independent definition of its flat index.
  int64_t count = 0;
  std::vector<int64_t> seen(static_cast<size_t>(o_n * i_n * kh * kw), 0);
  for (int64_t o = 0; o < o_n; ++o)
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x)
        for (int64_t i = 0; i < i_n; ++i) {
          ASSERT_EQ(ohwi_index(o, i, y, x, i_n, kh, kw), count++);
          seen[static_cast<size_t>(oihw_index(o, i, y, x, i_n, kh, kw))] += 1;
        }
  for (int64_t v : seen) ASSERT_EQ(v, 1);  // OIHW is a permutation of the same elements
  count = 0;
  for (int64_t o = 0; o < o_n; ++o)
    for (int64_t i = 0; i < i_n; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) ASSERT_EQ(oihw_index(o, i, y, x, i_n, kh, kw), count++);
}

TEST(Indexing, NhwcIndexSplitsAFlatIndex) {
  const int32_t h = 3, w = 5, c = 7;
  int64_t i = 0;
  for (int64_t n = 0; n < 4; ++n)
    for (int32_t y = 0; y < h; ++y)
      for (int32_t x = 0; x < w; ++x)
        for (int32_t ch = 0; ch < c; ++ch, ++i) {
          const NhwcIndex at = nhwc_index(i, h, w, c);
          ASSERT_EQ(at.n, n);
          ASSERT_EQ(at.y, y);
          ASSERT_EQ(at.x, x);
          ASSERT_EQ(at.c, ch);
        }
  const NhwcIndex far = nhwc_index((int64_t{1} << 33) + 8, 224, 224, 3);  // beyond 2^31: 64-bit arithmetic
  EXPECT_EQ(far.n, ((int64_t{1} << 33) + 8) / (224 * 224 * 3));
}

TEST(Indexing, ReluMaskBitsMatchAPackedReference) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 31, 32, 33, 100, 1000}) {
    std::vector<bool> on(static_cast<size_t>(n));
    for (size_t i = 0; i < on.size(); ++i) on[i] = (rng() & 1u) != 0;
    // What the kernel's __ballot_sync produces: lane L of the warp covering [32w, 32w + 32) sets bit L of word w.
    std::vector<uint32_t> words(static_cast<size_t>(mask_words(n)), 0u);
    ASSERT_EQ(words.size(), static_cast<size_t>((n + 31) / 32));
    for (int64_t i = 0; i < n; ++i)
      if (on[static_cast<size_t>(i)]) words[static_cast<size_t>(i / 32)] |= 1u << (i - i / 32 * 32);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(mask_bit(words[static_cast<size_t>(i / 32)], i), on[static_cast<size_t>(i)]) << i;
  }
}

// The element-wise kernels' packed path, walked the way they walk it: packs [0, packs_of), then the elements from the
// last whole pack on; every element exactly once, whatever n and the pack (4 floats, 8 halves).
TEST(Indexing, PacksAndTheirTailVisitEveryElementOnce) {
  EXPECT_TRUE(pack_aligned(0x1000));
  EXPECT_FALSE(pack_aligned(0x1004));
  EXPECT_FALSE(pack_aligned(0x1008));
  for (int per : {4, 8}) {
    for (int64_t n : {1, 3, 4, 7, 8, 9, 31, 32, 33, 1000, 1003}) {
      for (bool packed : {false, true}) {
        std::vector<int> visits(static_cast<size_t>(n), 0);
        const int64_t first = packed ? packs_of(n, per) * per : 0;
        if (packed)
          for (int64_t k = 0; k < packs_of(n, per); ++k)
            for (int j = 0; j < per; ++j) visits[static_cast<size_t>(k * per + j)] += 1;
        for (int64_t i = first; i < n; ++i) visits[static_cast<size_t>(i)] += 1;
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[static_cast<size_t>(i)], 1) << n << " " << per << " " << i;
        // The grid is sized for the work items: packs plus the tail, or every element.
        EXPECT_EQ(work_items(n, per, packed), packed ? packs_of(n, per) + (n - first) : n);
      }
    }
  }
}

TEST(KernelMath, ClassesAboveMatchesARankBySorting) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> level(0, 5);  // few distinct values: many ties
  for (int trial = 0; trial < 200; ++trial) {
    const int k = 1 + trial % 13;
    std::vector<float> z(static_cast<size_t>(k));
    for (float& v : z) v = static_cast<float>(level(rng)) * 0.5f;
    const int label = trial % k;
    // Rank = position of the label when classes are sorted by logit, descending, ties by index.
    std::vector<int> order(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) order[static_cast<size_t>(j)] = j;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return z[static_cast<size_t>(a)] > z[static_cast<size_t>(b)]; });
    const auto rank = std::find(order.begin(), order.end(), label) - order.begin();
    ASSERT_EQ(classes_above(z.data(), k, label), rank) << "trial " << trial;
  }
}

TEST(KernelMath, ShiftedExpAndMean) {
  EXPECT_EQ(shifted_exp(1000.0f, 1000.0f), 1.0f);  // the row max never overflows
  EXPECT_NEAR(shifted_exp(-1.0f, 1.0f), std::exp(-2.0), 1e-7);
  EXPECT_EQ(mean_of(6.0f, 4), 1.5f);
}

TEST(Sgd, SharedFormulaMatchesPyTorchNesterov) {
  // PyTorch: g += wd*w; v = mu*v + g; w -= lr*(g + mu*v).
  float w = 1.0f, v = 0.5f;
  math::sgd_element(w, 0.2f, v, 0.1f, 0.9f, 0.01f, math::Nesterov::kOn);
  const double g = 0.2 + 0.01 * 1.0, vr = 0.9 * 0.5 + g;
  EXPECT_NEAR(v, vr, 1e-7);
  EXPECT_NEAR(w, 1.0 - 0.1 * (g + 0.9 * vr), 1e-7);
}

}  // namespace
}  // namespace torus::worker::cuda::kmath

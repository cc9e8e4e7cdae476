#pragma once
// The scalar math of the NHWC batch norm kernels (norm_kernels.cu), as TORUS_HD functions that tests/gpu_math runs
// on the CPU. The batch norm of an (N, H, W, C) tensor reduces each channel over m = N * H * W rows: every block
// of the statistics kernels folds a slice of rows into per-channel partials, and the finalize kernels merge each
// channel's slices in kBnFinalizeLanes lanes, then the lanes, each in a fixed order (deterministic, no atomics).
#include <cstdint>

#include "worker/backend/cuda/kernel_math.h"

namespace torus::worker::cuda::kmath {

// Count, mean and sum of squared deviations of the values seen (Welford). The count is an integer, exact at any
// number of rows (an fp32 count stops growing at 2^24: a thread folding more rows, or a merge past it, would weigh
// every later value wrong); the mean and m2 stay fp32, whose relative rounding the count's conversion matches.
struct Moments {
  int64_t n = 0;
  float mean = 0.0f, m2 = 0.0f;
};

TORUS_HD inline void moments_push(Moments& a, float x) {
  a.n += 1;
  const float d = x - a.mean;
  a.mean += d / static_cast<float>(a.n);
  a.m2 += d * (x - a.mean);
}

// Chan et al.'s merge of two disjoint sets' moments.
TORUS_HD inline Moments moments_merge(Moments a, Moments b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  Moments r;
  r.n = a.n + b.n;
  const float d = b.mean - a.mean;
  const float share = static_cast<float>(b.n) / static_cast<float>(r.n);
  r.mean = a.mean + d * share;
  r.m2 = a.m2 + b.m2 + d * d * (static_cast<float>(a.n) * share);
  return r;
}

// Rows are indexed in int64 and counted exactly: any positive count.
TORUS_HD inline bool bn_rows_supported(int64_t m) { return m > 0; }

// The statistics kernels' grid: blocks of kBnLanes channels x kBnRowsPerBlock rows; `bn_row_slices` row slices
// (gridDim.y) so that about kBnTargetBlocks blocks fill the GPU, each thread folding at least kBnMinRowsPerThread
// rows. A pure function of the shape: the partials' scratch size follows from it.
inline constexpr int kBnLanes = 32, kBnRowsPerBlock = 8;
inline constexpr int64_t kBnTargetBlocks = 1024, kBnMinRowsPerThread = 16;
TORUS_HD inline int64_t bn_channel_tiles(int64_t c) { return (c + kBnLanes - 1) / kBnLanes; }
TORUS_HD inline int64_t bn_row_slices(int64_t m, int64_t c) {
  const int64_t by_rows = (m + kBnRowsPerBlock * kBnMinRowsPerThread - 1) / (kBnRowsPerBlock * kBnMinRowsPerThread);
  int64_t by_blocks = kBnTargetBlocks / bn_channel_tiles(c);
  if (by_blocks < 1) by_blocks = 1;
  const int64_t r = by_rows < by_blocks ? by_rows : by_blocks;
  return r < 1 ? 1 : r;
}

// The ReLU of a BN + ReLU layer fused into the normalize pass, its 1-bit mask (kernel_math.h's layout: element i
// is bit i % 32 of word i / 32) written by a warp ballot: warp (row r, tile t) covers elements r * c + 32t ... + 31,
// which are one whole mask word exactly when c is a multiple of 32 (every ResNet-50 layer). Other widths run the
// separate ReLU-with-mask kernel after the normalize pass.
static_assert(kBnLanes == 32, "a warp of channel lanes is one mask word");
TORUS_HD inline bool bn_apply_writes_mask(int64_t c) { return c % kBnLanes == 0; }
TORUS_HD inline int64_t bn_mask_word(int64_t row, int64_t c, int64_t tile) { return row * (c / kBnLanes) + tile; }
// The gradient that reaches the normalization through the ReLU: dy where the mask has element i, else 0 (no mask:
// no ReLU). The backward kernels read dy through it instead of a separate masked copy.
TORUS_HD inline float through_relu_mask(const uint32_t* mask, int64_t i, float dy) {
  return mask == nullptr || mask_bit(mask[i / 32], i) ? dy : 0.0f;
}

// The finalize kernels' merge of one channel's slice partials (partial[slice * c + channel]): lane l of
// kBnFinalizeLanes merges slices l, l + kBnFinalizeLanes, ... in order, then lane 0 merges the lanes in order. Few
// channels have many slices (512 at 64 channels, to fill the GPU), which one thread per channel merged one after the
// other: 5.3 ms of a 50.6 ms bf16 ResNet-50 step on an H200 (ncu, docs/gpu.md).
inline constexpr int kBnFinalizeLanes = 16;
TORUS_HD inline Moments lane_moments(const Moments* partial, int64_t slices, int64_t c, int64_t ch, int lane) {
  Moments acc;
  for (int64_t r = lane; r < slices; r += kBnFinalizeLanes) acc = moments_merge(acc, partial[r * c + ch]);
  return acc;
}

// The backward's per-slice partials of one channel: the sums of dy and of dy * (x - mean).
struct Sums {
  float dy = 0.0f, dy_xmu = 0.0f;
};
TORUS_HD inline Sums sums_add(Sums a, Sums b) { return {a.dy + b.dy, a.dy_xmu + b.dy_xmu}; }
TORUS_HD inline Sums lane_sums(const Sums* partial, int64_t slices, int64_t c, int64_t ch, int lane) {
  Sums acc;
  for (int64_t r = lane; r < slices; r += kBnFinalizeLanes) acc = sums_add(acc, partial[r * c + ch]);
  return acc;
}

// One channel's normalization: math::bn_affine with its mean, 1/sqrt(var + eps), gamma and beta, gathered once per
// channel. It centers before scaling, which keeps a channel with a large mean and a small spread exact
// (x * scale + (beta - mean * scale) would cancel two large products).
struct Affine {
  float mean = 0.0f, invstd = 1.0f, gamma = 1.0f, beta = 0.0f;
};
TORUS_HD inline Affine bn_affine_of(float mean, float var, float eps, float gamma, float beta) {
  return {mean, invstd_from_var(var, eps), gamma, beta};
}
TORUS_HD inline float bn_apply(const Affine& f, float x) {
  return math::bn_affine(x, f.mean, f.invstd, f.gamma, f.beta);
}

// One channel's batch statistics from its merged moments over m rows: the biased variance the interface saves,
// and the unbiased one the running variance follows (PyTorch's convention, as the CPU backend).
TORUS_HD inline float biased_var(const Moments& a) { return a.n > 0 ? a.m2 / static_cast<float>(a.n) : 0.0f; }
TORUS_HD inline float unbiased_var(const Moments& a) {
  return a.n > 1 ? a.m2 / static_cast<float>(a.n - 1) : biased_var(a);
}

// The backward of y = (x - mean) * invstd * gamma + beta over m rows, from the channel's sums of dy and of
// dy * (x - mean): dbeta = sum dy, dgamma = invstd * sum dy (x - mean), and
// dx = gamma * invstd * (dy - sum dy / m - (x - mean) * invstd * dgamma / m) = a (dy - mean_dy) + b (x - mean).
struct NormBackwardCoefficients {
  float dgamma = 0.0f, dbeta = 0.0f, a = 0.0f, b = 0.0f, mean_dy = 0.0f, mean = 0.0f;
};
TORUS_HD inline NormBackwardCoefficients bn_backward_coefficients(float sum_dy, float sum_dy_xmu, float mean,
                                                                  float invstd, float gamma, float m) {
  NormBackwardCoefficients k;
  k.dbeta = sum_dy;
  k.dgamma = sum_dy_xmu * invstd;
  k.a = gamma * invstd;
  k.b = -k.a * invstd * k.dgamma / m;
  k.mean_dy = sum_dy / m;
  k.mean = mean;
  return k;
}
TORUS_HD inline float bn_backward_dx(const NormBackwardCoefficients& k, float x, float dy) {
  return k.a * (dy - k.mean_dy) + k.b * (x - k.mean);
}

}  // namespace torus::worker::cuda::kmath

#pragma once
// The scalar math of every CUDA kernel, as TORUS_HD (__host__ __device__) functions. This header includes no
// CUDA header: plain g++ compiles it for tests/gpu_math, so the CPU tests execute exactly the formulas the GPU
// runs. Shared formulas that the CPU backend also uses (SGD, label smoothing, running statistics) stay in
// worker/backend/math.h; this file adds what only the GPU kernels need.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "worker/backend/half.h"
#include "worker/backend/math.h"

namespace torus::worker::cuda::kmath {

// The bit casts and fp32 <-> bf16 / fp16 conversions live in worker/backend/half.h (shared with the CPU
// all-reduce), the top-k rank in worker/backend/math.h (shared with the CPU backend); the kernels name them as
// kmath:: functions.
using math::bf16_from_float;
using math::bits_float;
using math::classes_above;
using math::f16_from_float;
using math::float_bits;
using math::float_from_bf16;
using math::float_from_f16;
using math::ranks_above;

// Inf and NaN have an all-ones exponent; a bit test works the same on host and device (no <cmath> dependence).
TORUS_HD inline bool is_finite(float f) { return (float_bits(f) & 0x7f800000u) != 0x7f800000u; }

// --- launch geometry (host side; here so the CPU tests pin it down) -----------------------------------------
// Blocks of `threads` for a grid-stride loop over n elements: at least 1, at most `max_blocks` (the loop covers
// the rest).
TORUS_HD inline unsigned grid_blocks(int64_t n, int threads, int64_t max_blocks) {
  const int64_t b = n <= 0 ? 1 : (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}
// Blocks of `threads` when every row gets one 32-lane warp (no grid-stride: one warp per row).
TORUS_HD inline unsigned warp_per_row_blocks(int64_t rows, int threads) {
  return static_cast<unsigned>((rows * 32 + threads - 1) / threads);
}
// The element-wise kernels' 16-byte path: where every pointer of a call is 16-byte aligned, elements go in packs of
// kPackBytes (4 floats, 8 bf16 or f16 values), one load or store per pack; the last n % pack elements, and every
// element of a call with an unaligned pointer, one at a time. `work_items`: what the grid is sized for (packs plus
// the tail), so that a packed call does not start 4-8 times the threads it has work for.
inline constexpr int64_t kPackBytes = 16;
TORUS_HD inline bool pack_aligned(uintptr_t address) { return address % kPackBytes == 0; }
TORUS_HD inline int64_t packs_of(int64_t n, int64_t per_pack) { return n / per_pack; }
TORUS_HD inline int64_t work_items(int64_t n, int64_t per_pack, bool packed) {
  return packed ? packs_of(n, per_pack) + n % per_pack : n;
}
// `offset` rounded up to a multiple of `alignment` (a power of two).
TORUS_HD inline size_t align_up(size_t offset, size_t alignment) { return (offset + alignment - 1) & ~(alignment - 1); }

// --- indexing -----------------------------------------------------------------------------------------------
// Conv weights: plain (O, I, KH, KW) and cuDNN's NHWC filter layout (O, KH, KW, I), both dense.
TORUS_HD inline int64_t oihw_index(int64_t o, int64_t i, int64_t y, int64_t x, int64_t c_in, int64_t kh, int64_t kw) {
  return ((o * c_in + i) * kh + y) * kw + x;
}
TORUS_HD inline int64_t ohwi_index(int64_t o, int64_t i, int64_t y, int64_t x, int64_t c_in, int64_t kh, int64_t kw) {
  return ((o * kh + y) * kw + x) * c_in + i;
}

// A dense NHWC tensor's flat index split into (sample, row, column, channel).
struct NhwcIndex {
  int64_t n = 0;
  int32_t y = 0, x = 0, c = 0;
};
TORUS_HD inline NhwcIndex nhwc_index(int64_t i, int32_t h, int32_t w, int32_t c) {
  const int64_t per_image = static_cast<int64_t>(h) * w * c;
  const int64_t rest = i % per_image;
  NhwcIndex r;
  r.n = i / per_image;
  r.y = static_cast<int32_t>(rest / (static_cast<int64_t>(w) * c));
  r.x = static_cast<int32_t>(rest / c % w);
  r.c = static_cast<int32_t>(rest % c);
  return r;
}

// 1-bit ReLU masks: element i is bit i % 32 of word i / 32.
TORUS_HD inline int64_t mask_words(int64_t n) { return (n + 31) / 32; }
TORUS_HD inline bool mask_bit(uint32_t word, int64_t i) { return ((word >> (i % 32)) & 1u) != 0u; }

// --- elementwise ----------------------------------------------------------------------------------------
TORUS_HD inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
// Gradient through a ReLU whose output was y (y > 0 <=> the input was positive).
TORUS_HD inline float relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }
TORUS_HD inline float add_act(float a, float b, bool relu_after) { return relu_after ? relu(a + b) : a + b; }

// --- batch norm: cuDNN saves 1/sqrt(var + eps); the interface speaks biased variance ---------------------
using math::invstd_from_var;
TORUS_HD inline float var_from_invstd(float invstd, float eps) { return 1.0f / (invstd * invstd) - eps; }

// --- softmax cross-entropy -------------------------------------------------------------------------------
// One logit's term of the row's softmax denominator, shifted by the row's max so it cannot overflow.
TORUS_HD inline float shifted_exp(float z, float zmax) { return expf(z - zmax); }
// log softmax of one logit given the row's max and log(sum(exp(z - max))).
TORUS_HD inline float log_prob(float z, float zmax, float log_sum) { return (z - zmax) - log_sum; }
// One class's contribution to a row's loss and its gradient; `grad_scale` is the loss scale (1 without one).
TORUS_HD inline float xent_term(float lp, int k, int label, float smoothing, int classes) {
  return -math::smoothed_target(k, label, smoothing, classes) * lp;
}
TORUS_HD inline float xent_grad(float lp, int k, int label, float smoothing, int classes, float inv_n,
                                float grad_scale) {
  return math::xent_logit_grad(expf(lp), math::smoothed_target(k, label, smoothing, classes), inv_n) * grad_scale;
}
// The batch mean of per-row losses (the loss the interface returns).
TORUS_HD inline float mean_of(float sum, int64_t n) { return sum / static_cast<float>(n); }

// --- dynamic loss scaling (fp16): a pure state machine; on the GPU one thread runs it, so no host sync ------
// The state machine's data (math.h: the backend interface names them too).
using math::LossScaleConfig;
using math::LossScaleState;

TORUS_HD inline LossScaleState loss_scale_initial(const LossScaleConfig& c) { return {c.init_scale, 0, 0, 0}; }

// Multiplies one gradient by 1/scale and flags a non-finite result (a flag that only ever goes to 1).
TORUS_HD inline float unscale(float g, float inv_scale, int32_t& found_inf) {
  const float r = g * inv_scale;
  if (!is_finite(r)) found_inf = 1;
  return r;
}

// End of a step: back off (and count a skipped step) on inf/NaN, grow after growth_interval finite steps.
TORUS_HD inline void loss_scale_update(LossScaleState& s, const LossScaleConfig& c) {
  if (s.found_inf != 0) {
    const float backed = s.scale * c.backoff_factor;
    s.scale = backed < c.min_scale ? c.min_scale : backed;
    s.good_steps = 0;
    s.skipped += 1;
  } else if (++s.good_steps >= c.growth_interval) {
    const float grown = s.scale * c.growth_factor;
    s.scale = grown > c.max_scale ? c.max_scale : grown;
    s.good_steps = 0;
  }
  s.found_inf = 0;
}

// --- fused SGD: one launch updates every tensor of an arena -------------------------------------------------------
using math::SgdSegment;  // math.h: the backend interface names it too
// One block's share: at most kSgdChunkElements elements of one segment.
struct SgdChunk {
  int64_t offset = 0;
  int32_t elements = 0;
  float weight_decay = 0;
};
inline constexpr int32_t kSgdChunkElements = 1 << 14;

// The chunk table of a fused update: each segment cut, in order, into chunks of at most `max_elements`.
inline std::vector<SgdChunk> sgd_chunks(std::span<const SgdSegment> segments, int32_t max_elements) {
  std::vector<SgdChunk> out;
  for (const SgdSegment& s : segments)
    for (int64_t done = 0; done < s.elements; done += max_elements) {
      const int64_t left = s.elements - done;
      out.push_back({s.offset + done, static_cast<int32_t>(left < max_elements ? left : max_elements), s.weight_decay});
    }
  return out;
}

// Element i of chunk c (thread i of its block, striding by the block size): math::sgd_element with the chunk's
// weight decay, in place on the arenas w (parameters), g (gradients), v (momentum).
TORUS_HD inline void sgd_chunk_element(const SgdChunk& c, int32_t i, float* w, const float* g, float* v, float lr,
                                       float momentum, math::Nesterov nesterov) {
  const int64_t at = c.offset + i;
  float wi = w[at], vi = v[at];
  math::sgd_element(wi, g[at], vi, lr, momentum, c.weight_decay, nesterov);
  w[at] = wi;
  v[at] = vi;
}

// --- data augmentation: per-sample random translation (padded with pixel 0) and horizontal flip ----------------------
// splitmix64's finalizer: a counter-based generator, so each sample's draw depends only on (seed, sample).
TORUS_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TORUS_HD inline uint32_t draw(uint64_t seed, uint64_t sample, uint32_t stream) {
  return static_cast<uint32_t>(mix64(seed ^ mix64(sample * 4u + stream)) >> 32);
}

struct SampleAugment {
  int32_t dy = 0, dx = 0;  // source offset of the crop, in [-max_shift, max_shift]
  int32_t flip = 0;
};

TORUS_HD inline SampleAugment sample_augment(uint64_t seed, uint64_t sample, int32_t max_shift, bool flip) {
  SampleAugment a;
  const uint32_t span = static_cast<uint32_t>(2 * max_shift + 1);
  a.dy = static_cast<int32_t>(draw(seed, sample, 0) % span) - max_shift;
  a.dx = static_cast<int32_t>(draw(seed, sample, 1) % span) - max_shift;
  a.flip = flip ? static_cast<int32_t>(draw(seed, sample, 2) & 1u) : 0;
  return a;
}

// Source pixel of output (y, x); false when it falls in the padding.
TORUS_HD inline bool source_pixel(int32_t y, int32_t x, int32_t h, int32_t w, SampleAugment a, int32_t& sy,
                                  int32_t& sx) {
  const int32_t fx = a.flip ? (w - 1 - x) : x;
  sy = y + a.dy;
  sx = fx + a.dx;
  return sy >= 0 && sy < h && sx >= 0 && sx < w;
}

// A u8 pixel scaled to [0, 1] and standardized per channel.
TORUS_HD inline float normalize_pixel(uint8_t v, float mean, float inv_std) {
  return (static_cast<float>(v) * (1.0f / 255.0f) - mean) * inv_std;
}

using math::AugmentSpec;  // math.h: the backend interface names it too

// Output element (y, x, ch) of one augmented sample, `image` its u8 (h, w, c) pixels. Padding reads pixel value 0,
// as the host loader's pad-and-crop does (data/image.cc), so both paths normalize padding to -mean / std.
TORUS_HD inline float augmented_value(const uint8_t* image, int32_t y, int32_t x, int32_t ch, int32_t h, int32_t w,
                                      int32_t c, SampleAugment a, const AugmentSpec& spec) {
  int32_t sy = 0, sx = 0;
  const bool inside = source_pixel(y, x, h, w, a, sy, sx);
  const uint8_t px = inside ? image[(static_cast<int64_t>(sy) * w + sx) * c + ch] : uint8_t{0};
  return normalize_pixel(px, spec.mean[ch], spec.inv_std[ch]);
}

}  // namespace torus::worker::cuda::kmath

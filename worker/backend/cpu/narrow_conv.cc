#include "worker/backend/cpu/narrow_conv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cpu/staging.h"
#include "worker/backend/cpu/vec.h"

// Compiled with -ffp-contract=fast (CMakeLists.txt): every multiply-add below is one FMA.
// Functions taking or returning vectors are always inlined into the wrapper of their ISA, so no vector crosses a
// call and GCC's note that such a call's ABI depends on the ISA is moot.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's unpack intrinsics start from _mm512_undefined_ps(), which -O3 then reports as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace torus::worker::cpu {
namespace {

constexpr int kTaps = 9;  // 3x3

// The channel pairs (C_in, C_out) that run here per pass, each measured faster than oneDNN's NHWC kernels (best of
// 15, batch 128, 28x28, 1 thread, warm: forward 8 -> 16 1.61 vs 2.8 ms, 1 -> 8 0.41 vs 0.85; inside a training step
// 1.8-2.1 vs 2.3-2.6 and 0.47-0.53 vs 0.63-0.73; at 14x14, per step, 16 -> 16 (two layers) 1.9-2.0 vs 2.2 and
// 16 -> 32 1.7-1.9 vs 2.1). Backward data of 8 -> 16 has its own loop below (this loop run on
// dy with flipped weights has 8 output channels, half a vector, and took 5-6 ms in a step against oneDNN's 3.6-4);
// backward weights stays on oneDNN: a register-blocked one (24 sums of 16 output channels in registers, one pass
// per kernel row and block of input channels, the next image prefetched) took, per step, 0.6-0.7 ms at 1 -> 8,
// 2.3-2.4 at 8 -> 16, 2.0 at 16 -> 16 (two layers) and 1.9-2.1 at 16 -> 32, against oneDNN's 0.45, 2.1-2.3, 1.55
// and 1.7. The forward's loop on flipped weights was even with oneDNN's backward data at 16 -> 32
// (1.9-2.0 ms a step) and slower at 16 -> 16 (1.9 vs 1.7).
struct Pair {
  int c_in, c_out;
};
constexpr Pair kForwardPairs[] = {{1, 8}, {8, 16}, {16, 16}, {16, 32}};

using vec::lanes_for;
using vec::load;
using vec::store;
using vec::Vec;

// Floats per vector (AVX-512), and the vector registers the accumulators may take of its 32 (the rest: weights, the
// broadcast).
constexpr int kLanes = 16;
constexpr int kAccumulatorRegisters = 28;

// One image, zero-padded by one pixel on each side: (H + 2, W + 2, C). The borders are zeroed once; copy() writes
// only the interior.
class Padded {
 public:
  Padded(int64_t h, int64_t w, int64_t c) : h_(h), w_(w), c_(c), data_(static_cast<size_t>((h + 2) * (w + 2) * c)) {}
  void copy(const float* image) {  // (H, W, C)
    for (int64_t r = 0; r < h_; ++r)
      std::memcpy(data_.data() + ((r + 1) * (w_ + 2) + 1) * c_, image + r * w_ * c_,
                  static_cast<size_t>(w_ * c_) * sizeof(float));
  }
  const float* at(int64_t r, int64_t col) const { return data_.data() + (r * (w_ + 2) + col) * c_; }
  int64_t row_floats() const { return (w_ + 2) * c_; }

 private:
  int64_t h_, w_, c_;
  std::vector<float> data_;
};

// Asks for the next image's input a row at a time while this one computes: from memory (each layer's input was
// written by the layer before, a batch of megabytes), 1 thread, the loops waited on loads as long as they computed.
inline void prefetch_row(const char* at, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(at + b, _MM_HINT_T0);
}

// ---- forward ---------------------------------------------------------------------------------

// kB output pixels of one row, all kCo channels: y[b] = sum over taps and input channels of in * w.
// `in` is the padded input at the block's first pixel's top-left tap; w is (kh, kw, kCi, kCo).
template <int kCi, int kCo, int V, int kB>
[[gnu::always_inline]] inline void forward_block(const float* in, int64_t row_floats, const float* w, float* y) {
  constexpr int K = kCo / V;
  Vec<V> acc[kB][K];
#pragma GCC unroll 32
  for (int b = 0; b < kB; ++b)
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) acc[b][k] = Vec<V>{};
  for (int kh = 0; kh < 3; ++kh)
    for (int kw = 0; kw < 3; ++kw) {
      const float* src = in + kh * row_floats + kw * kCi;
      const float* wt = w + (kh * 3 + kw) * kCi * kCo;
#pragma GCC unroll 2
      for (int ci = 0; ci < kCi; ++ci) {
        Vec<V> wv[K];
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) wv[k] = load<V>(wt + ci * kCo + k * V);
#pragma GCC unroll 32
        for (int b = 0; b < kB; ++b) {
          const float s = src[b * kCi + ci];
#pragma GCC unroll 4
          for (int k = 0; k < K; ++k) acc[b][k] += s * wv[k];
        }
      }
    }
#pragma GCC unroll 32
  for (int b = 0; b < kB; ++b)
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) store<V>(y + b * kCo + k * V, acc[b][k]);
}

struct ImageRange {
  int64_t begin, end;  // images [begin, end)
  int64_t h, w;
};

// y (images of ImageRange, NHWC) = conv(x, w), w (kh, kw, kCi, kCo).
template <int kCi, int kCo>
[[gnu::always_inline]] inline void forward_images(const ImageRange& r, const float* x, const float* w, float* y) {
  constexpr int V = lanes_for(kCo, kLanes), K = kCo / V;
  constexpr int kB = std::min(14, std::max(1, kAccumulatorRegisters / K));
  Padded p(r.h, r.w, kCi);
  for (int64_t n = r.begin; n < r.end; ++n) {
    p.copy(x + n * r.h * r.w * kCi);
    const int64_t row_bytes = r.w * kCi * static_cast<int64_t>(sizeof(float));
    const char* next = reinterpret_cast<const char*>(x + (n + 1) * r.h * r.w * kCi);
    for (int64_t oh = 0; oh < r.h; ++oh) {
      if (n + 1 < r.end) prefetch_row(next + oh * row_bytes, row_bytes);
      float* yrow = y + (n * r.h + oh) * r.w * kCo;
      int64_t ow = 0;
      for (; ow + kB <= r.w; ow += kB) forward_block<kCi, kCo, V, kB>(p.at(oh, ow), p.row_floats(), w, yrow + ow * kCo);
      for (; ow < r.w; ++ow) forward_block<kCi, kCo, V, 1>(p.at(oh, ow), p.row_floats(), w, yrow + ow * kCo);
    }
  }
}

// ---- backward data ----------------------------------------------------------------------------------------------

// dx of the 8 -> 16 layer: 8 channels, half a vector per pixel in NHWC, so this loop puts 16 pixels of a row in a
// vector instead (best of 15, batch 128, 1 thread: 2.0 ms warm, 2.2 cold, against oneDNN's 2.6 warm; in a step
// 2.9 against 3.6-4.8). Each image's dy is gathered into channel planes, zero-padded ((16, H + 2, 16 * blocks + 32)), and
// two blocks of 16 output pixels x 8 channels stay in registers while, for each of the 9 taps x 16 dy channels, a
// plane row times the broadcast flipped weight is added; the sums are transposed back to NHWC in registers.
constexpr int kDataCi = 8, kDataCo = 16;

// Pixels 4L + j and 4L + j + 1 (j = 0, 2) of store_pixels' q: [q0j lane L, q1j lane L, q0(j+1) lane L, q1(j+1) lane L].
template <int L, int J>
__attribute__((target("avx512f"), always_inline)) inline void store_pair(const __m512 (&q)[2][4], float* out,
                                                                        int64_t valid) {
  constexpr int kImm = L | L << 2 | L << 4 | L << 6;
  const __m512 a = _mm512_shuffle_f32x4(q[0][J], q[0][J + 1], kImm), b = _mm512_shuffle_f32x4(q[1][J], q[1][J + 1], kImm);
  const __m512 v = _mm512_mask_blend_ps(0xF0F0, a, b);
  constexpr int64_t kFirst = 4 * L + J;
  if (kFirst + 2 <= valid)
    _mm512_storeu_ps(out + kFirst * kDataCi, v);
  else if (kFirst + 1 == valid)
    _mm512_mask_storeu_ps(out + kFirst * kDataCi, 0x00FF, v);
}

// Stores 8 channel vectors of 16 pixels (acc[i] = channel i) as `valid` pixels of NHWC: two 4x4 transposes inside
// each 128-bit lane (channels 0-3 and 4-7), then each pair of pixels' halves joined into one vector.
__attribute__((target("avx512f"), always_inline)) inline void store_pixels(const __m512 (&acc)[kDataCi], float* out,
                                                                          int64_t valid) {
  __m512 q[2][4];  // q[g][j], 128-bit lane L: channels 4g..4g+3 of pixel 4L + j
  for (int g = 0; g < 2; ++g) {
    const __m512 t0 = _mm512_unpacklo_ps(acc[4 * g], acc[4 * g + 1]), t1 = _mm512_unpackhi_ps(acc[4 * g], acc[4 * g + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(acc[4 * g + 2], acc[4 * g + 3]),
                 t3 = _mm512_unpackhi_ps(acc[4 * g + 2], acc[4 * g + 3]);
    q[g][0] = _mm512_shuffle_ps(t0, t2, 0x44);
    q[g][1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    q[g][2] = _mm512_shuffle_ps(t1, t3, 0x44);
    q[g][3] = _mm512_shuffle_ps(t1, t3, 0xEE);
  }
  store_pair<0, 0>(q, out, valid), store_pair<0, 2>(q, out, valid), store_pair<1, 0>(q, out, valid);
  store_pair<1, 2>(q, out, valid), store_pair<2, 0>(q, out, valid), store_pair<2, 2>(q, out, valid);
  store_pair<3, 0>(q, out, valid), store_pair<3, 2>(q, out, valid);
}

__attribute__((target("avx512f"))) void backward_data_images(const ImageRange& r, const float* dy,
                                                              const float* flipped, float* dx) {
  const int64_t h = r.h, w = r.w, blocks = (w + 15) / 16, stride = blocks * 16 + 32, plane = (h + 2) * stride;
  std::vector<float> planes(static_cast<size_t>(kDataCo * plane), 0.0f);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i gather_at = _mm512_mullo_epi32(lane, _mm512_set1_epi32(kDataCo));
  const auto mask_of = [&](int64_t block) {
    const int64_t valid = std::clamp<int64_t>(w - block * 16, 0, 16);
    return static_cast<__mmask16>((1u << valid) - 1u);
  };
  for (int64_t n = r.begin; n < r.end; ++n) {
    const float* d = dy + n * h * w * kDataCo;
    for (int64_t row = 0; row < h; ++row)
      for (int64_t b = 0; b < blocks; ++b)
        for (int o = 0; o < kDataCo; ++o) {
          const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask_of(b), gather_at,
                                                    d + (row * w + b * 16) * kDataCo + o, 4);
          _mm512_storeu_ps(planes.data() + o * plane + (row + 1) * stride + b * 16 + 1, v);
        }
    float* out = dx + n * h * w * kDataCi;
    // The next image's dy is fetched while this one computes (cold data, 1 thread: 3.4 -> 2.2 ms a batch; warm 2.1).
    const char* next = reinterpret_cast<const char*>(d + h * w * kDataCo);
    const int64_t row_bytes = w * kDataCo * static_cast<int64_t>(sizeof(float));
    for (int64_t oh = 0; oh < h; ++oh) {
      if (n + 1 < r.end) prefetch_row(next + oh * row_bytes, row_bytes);
      for (int64_t b = 0; b < blocks; b += 2) {
        __m512 acc0[kDataCi], acc1[kDataCi];
        for (int i = 0; i < kDataCi; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
        for (int tap = 0; tap < kTaps; ++tap) {
          const float* src = planes.data() + (oh + tap / 3) * stride + b * 16 + tap % 3;
          const float* wt = flipped + tap * kDataCo * kDataCi;
          for (int o = 0; o < kDataCo; ++o) {
            const __m512 v0 = _mm512_loadu_ps(src + o * plane), v1 = _mm512_loadu_ps(src + o * plane + 16);
#pragma GCC unroll 8
            for (int i = 0; i < kDataCi; ++i) {
              const __m512 wv = _mm512_set1_ps(wt[o * kDataCi + i]);
              acc0[i] = _mm512_fmadd_ps(v0, wv, acc0[i]);
              acc1[i] = _mm512_fmadd_ps(v1, wv, acc1[i]);
            }
          }
        }
        float* at = out + (oh * w + b * 16) * kDataCi;
        store_pixels(acc0, at, std::clamp<int64_t>(w - b * 16, 0, 16));
        store_pixels(acc1, at + 16 * kDataCi, std::clamp<int64_t>(w - b * 16 - 16, 0, 16));
      }
    }
  }
}

// ---- ISA dispatch ------------------------------------------------------------------------------------------------

struct Job {
  int c_in, c_out;
  ImageRange range;
  const float *x, *w;
  float* y;
};

template <int kCi, int kCo>
[[gnu::always_inline]] inline bool run_pair(const Job& j) {
  if (j.c_in != kCi || j.c_out != kCo) return false;
  forward_images<kCi, kCo>(j.range, j.x, j.w, j.y);
  return true;
}

// Every pair of kForwardPairs.
__attribute__((target("avx512f"))) void forward_avx512(const Job& j) {
  const bool ran = run_pair<1, 8>(j) || run_pair<8, 16>(j) || run_pair<16, 16>(j) || run_pair<16, 32>(j);
  if (!ran)
    throw InvalidArgument("narrow conv: no loop for " + std::to_string(j.c_in) + " -> " + std::to_string(j.c_out) +
                          " channels");
}

bool avx512() { return __builtin_cpu_supports("avx512f") && channel_block() == 16; }

// Calls run(range) over all images, split in contiguous ranges, one per thread.
template <typename Run>
void split_images(const ConvGeometry& g, Run run) {
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(g.n)));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    run(ImageRange{g.n * t / n, g.n * (t + 1) / n, g.h, g.w});
  }
}

}  // namespace

bool narrow_conv_by_hand(const ConvGeometry& g) {
  static const bool isa = avx512();
  return isa && g.kh == 3 && g.kw == 3 && g.stride == 1 && g.pad == 1 && !blocked_channels(g.c_in) &&
         !blocked_channels(g.c_out) &&
         std::any_of(std::begin(kForwardPairs), std::end(kForwardPairs),
                     [&](const Pair& p) { return p.c_in == g.c_in && p.c_out == g.c_out; });
}

bool narrow_conv_backward_data_by_hand(const ConvGeometry& g) {
  return narrow_conv_by_hand(g) && g.c_in == kDataCi && g.c_out == kDataCo;
}

// dx = the convolution of dy with the weights flipped in both axes and transposed: w'(kh, kw, o, i) =
// w(2 - kh, 2 - kw, i, o).
void narrow_conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  if (!narrow_conv_backward_data_by_hand(g))
    throw InvalidArgument("narrow conv: " + g.input_shape().str() + " -> " + g.output_shape().str() +
                          " has no hand-written backward data on this CPU");
  float flipped[kTaps * kDataCo * kDataCi];
  for (int tap = 0; tap < kTaps; ++tap)
    for (int i = 0; i < kDataCi; ++i)
      for (int o = 0; o < kDataCo; ++o)
        flipped[((kTaps - 1 - tap) * kDataCo + o) * kDataCi + i] = w[(tap * kDataCi + i) * kDataCo + o];
  split_images(g, [&](const ImageRange& r) { backward_data_images(r, dy, flipped, dx); });
}

void narrow_conv_forward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  if (!narrow_conv_by_hand(g))
    throw InvalidArgument("narrow conv: " + g.input_shape().str() + " -> " + g.output_shape().str() +
                          " has no hand-written forward on this CPU");
  split_images(g, [&](const ImageRange& r) {
    forward_avx512({static_cast<int>(g.c_in), static_cast<int>(g.c_out), r, x, w, y});
  });
}

}  // namespace torus::worker::cpu

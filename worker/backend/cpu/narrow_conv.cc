#include "worker/backend/cpu/narrow_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cpu/staging.h"

// Compiled with -ffp-contract=fast (CMakeLists.txt): every multiply-add below is one FMA.
// Functions taking or returning vectors are always inlined into the wrapper of their ISA, so no vector crosses a
// call and GCC's note that such a call's ABI depends on the ISA is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu {
namespace {

constexpr int kTaps = 9;  // 3x3

// The channel pairs (C_in, C_out) that run here per pass, each measured faster than oneDNN's NHWC kernels (best of
// 15, batch 128, 28x28, 1 thread, warm: forward 8 -> 16 1.61 vs 2.8 ms, 1 -> 8 0.41 vs 0.85; inside a training step
// 1.8-2.1 vs 2.3-2.6 and 0.47-0.53 vs 0.63-0.73). The backward passes stay on oneDNN: the same loops as backward
// data (the forward of dy with flipped, transposed weights; 8 output channels, half a vector) took 5-6 ms in a step
// against oneDNN's 3.6-4, and a register-blocked backward weights 0.6-0.7 ms (1 -> 8) and 2.7 (8 -> 16) against
// 0.45 and 2.3.
struct Pair {
  int c_in, c_out;
};
constexpr Pair kForwardPairs[] = {{1, 8}, {8, 16}};

template <int V>
struct VecOf {
  typedef float type __attribute__((vector_size(V * sizeof(float))));
};
template <int V>
using Vec = typename VecOf<V>::type;

template <int V>
[[gnu::always_inline]] inline Vec<V> load(const float* p) {
  Vec<V> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int V>
[[gnu::always_inline]] inline void store(float* p, Vec<V> v) {
  std::memcpy(p, &v, sizeof(v));
}

// The widest vector (at most `lanes` floats) that tiles c channels.
constexpr int lanes_for(int c, int lanes) {
  while (c % lanes != 0) lanes /= 2;
  return lanes;
}
// Vector registers the accumulators may take: of 32 with AVX-512, of 16 below (the rest: weights, the broadcast).
constexpr int accumulator_registers(int isa_lanes) { return isa_lanes == 16 ? 28 : 12; }

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

// ---- forward (and backward data) ---------------------------------------------------------------------------------

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
template <int kCi, int kCo, int kLanes>
[[gnu::always_inline]] inline void forward_images(const ImageRange& r, const float* x, const float* w, float* y) {
  constexpr int V = lanes_for(kCo, kLanes), K = kCo / V;
  constexpr int kB = std::min(14, std::max(1, accumulator_registers(kLanes) / K));
  Padded p(r.h, r.w, kCi);
  for (int64_t n = r.begin; n < r.end; ++n) {
    p.copy(x + n * r.h * r.w * kCi);
    for (int64_t oh = 0; oh < r.h; ++oh) {
      float* yrow = y + (n * r.h + oh) * r.w * kCo;
      int64_t ow = 0;
      for (; ow + kB <= r.w; ow += kB) forward_block<kCi, kCo, V, kB>(p.at(oh, ow), p.row_floats(), w, yrow + ow * kCo);
      for (; ow < r.w; ++ow) forward_block<kCi, kCo, V, 1>(p.at(oh, ow), p.row_floats(), w, yrow + ow * kCo);
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

template <int kCi, int kCo, int kLanes>
[[gnu::always_inline]] inline bool run_pair(const Job& j) {
  if (j.c_in != kCi || j.c_out != kCo) return false;
  forward_images<kCi, kCo, kLanes>(j.range, j.x, j.w, j.y);
  return true;
}

// Every pair of kForwardPairs.
template <int kLanes>
[[gnu::always_inline]] inline void run_isa(const Job& j) {
  const bool ran = run_pair<1, 8, kLanes>(j) || run_pair<8, 16, kLanes>(j);
  if (!ran)
    throw InvalidArgument("narrow conv: no loop for " + std::to_string(j.c_in) + " -> " + std::to_string(j.c_out) +
                          " channels");
}

__attribute__((target("avx512f"))) void run_avx512(const Job& j) { run_isa<16>(j); }

bool avx512() { return __builtin_cpu_supports("avx512f") && channel_block() == 16; }

// Runs the job over all images, split in contiguous ranges, one per thread.
void run(Job j, int64_t images) {
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(images)));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    Job mine = j;
    mine.range.begin = images * t / n;
    mine.range.end = images * (t + 1) / n;
    run_avx512(mine);
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

void narrow_conv_forward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  if (!narrow_conv_by_hand(g))
    throw InvalidArgument("narrow conv: " + g.input_shape().str() + " -> " + g.output_shape().str() +
                          " has no hand-written forward on this CPU");
  run({static_cast<int>(g.c_in), static_cast<int>(g.c_out), {0, 0, g.h, g.w}, x, w, y}, g.n);
}

}  // namespace torus::worker::cpu

#include "worker/backend/cpu/small_conv.h"

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cpu/image_layout.h"
#include "worker/backend/cpu/staging.h"
#include "worker/backend/cpu/vec.h"

// Compiled with -ffp-contract=fast and -O3 (CMakeLists.txt): the products are FMAs, the accumulators registers.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu {
namespace {

using vec::load;
using vec::store;
using vec::Vec;

constexpr int V = 8;  // floats per AVX2 vector
static_assert(V == ImageLayout::kBlock);
// Register blocking (16 AVX2 registers): kRows input channels x kVecs vectors of output channels of accumulators,
// kVecs gradient vectors, one broadcast.
constexpr int kRows = 4, kVecs = 2;
constexpr int64_t kMaxSide = 6, kMaxChannels = 256;

// The rows of one tap: per output pixel where it lands inside the image, that pixel's offset in dy and its input
// pixel's offset in x.
struct TapRows {
  std::vector<int64_t> x, dy;
};
std::vector<TapRows> tap_rows(const ConvGeometry& g, const ImageLayout& in, const ImageLayout& out) {
  std::vector<TapRows> taps(9);
  for (int64_t kh = 0; kh < 3; ++kh)
    for (int64_t kw = 0; kw < 3; ++kw)
      for (int64_t r = 0; r < g.h; ++r)
        for (int64_t c = 0; c < g.w; ++c) {
          const int64_t ir = r + kh - 1, ic = c + kw - 1;
          if (ir < 0 || ic < 0 || ir >= g.h || ic >= g.w) continue;
          taps[static_cast<size_t>(kh * 3 + kw)].x.push_back(in.at(ir, ic));
          taps[static_cast<size_t>(kh * 3 + kw)].dy.push_back(out.at(r, c));
        }
  return taps;
}

// dw (9, ci, co) += the products of images [begin, end).
__attribute__((target("avx2,fma"))) void accumulate(const ConvGeometry& g, int64_t begin, int64_t end, const float* x,
                                                    const float* dy, float* dw) {
  const ImageLayout in = ImageLayout::of(g.h, g.w, g.c_in), out = ImageLayout::of(g.h, g.w, g.c_out);
  const std::vector<TapRows> taps = tap_rows(g, in, out);
  const int64_t x_image = g.h * g.w * g.c_in, dy_image = g.h * g.w * g.c_out;
  for (size_t tap = 0; tap < taps.size(); ++tap) {
    const TapRows& rows = taps[tap];
    const size_t k = rows.x.size();
    for (int64_t i0 = 0; i0 < g.c_in; i0 += kRows)
      for (int64_t o = 0; o < g.c_out; o += kVecs * V) {
        Vec<V> acc[kRows][kVecs] = {};
        const int64_t xi = in.channel(i0), dyo[kVecs] = {out.channel(o), out.channel(o + V)};
        for (int64_t n = begin; n < end; ++n) {
          const float* xn = x + n * x_image + xi;
          const float* dyn = dy + n * dy_image;
          for (size_t j = 0; j < k; ++j) {
            Vec<V> d[kVecs];
            for (int v = 0; v < kVecs; ++v) d[v] = load<V>(dyn + rows.dy[j] + dyo[v]);
            const float* xs = xn + rows.x[j];  // kRows channels in a row: i0 is a multiple of 4 within its block
            for (int b = 0; b < kRows; ++b)
              for (int v = 0; v < kVecs; ++v) acc[b][v] += xs[b] * d[v];
          }
        }
        for (int b = 0; b < kRows; ++b)
          for (int v = 0; v < kVecs; ++v) {
            float* at = dw + (static_cast<int64_t>(tap) * g.c_in + i0 + b) * g.c_out + o + v * V;
            store<V>(at, load<V>(at) + acc[b][v]);
          }
      }
  }
}

}  // namespace

bool small_conv_weights_by_hand(const ConvGeometry& g) {
  return hand_avx2_kernels() && g.kh == 3 && g.kw == 3 && g.stride == 1 && g.pad == 1 && g.c_in % kRows == 0 &&
         g.c_out % (kVecs * V) == 0 && std::max(g.c_in, g.c_out) <= kMaxChannels && std::max(g.h, g.w) <= kMaxSide;
}

void small_conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  if (!small_conv_weights_by_hand(g))
    throw InvalidArgument("small conv: " + g.input_shape().str() + " -> " + g.output_shape().str() +
                          " has no hand-written backward weights on this CPU");
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(g.n)));
  const size_t per = static_cast<size_t>(9 * g.c_in * g.c_out);
  std::vector<float> partial(per * static_cast<size_t>(threads), 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const int k = omp_get_thread_num(), n = omp_get_num_threads();
    accumulate(g, g.n * k / n, g.n * (k + 1) / n, x, dy, partial.data() + per * static_cast<size_t>(k));
  }
  for (int k = 1; k < threads; ++k)
    for (size_t i = 0; i < per; ++i) partial[i] += partial[per * static_cast<size_t>(k) + i];
  std::copy(partial.begin(), partial.begin() + static_cast<long>(per), dw);
}

}  // namespace torus::worker::cpu

#include "worker/backend/cpu/winograd.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cpu/image_layout.h"
#include "worker/backend/cpu/staging.h"
#include "worker/backend/cpu/vec.h"
#include "worker/backend/cpu/winograd_f4.h"

// Compiled with -ffp-contract=fast and -O3 (CMakeLists.txt): the products are FMAs, the arrays of vectors registers.
// Functions taking or returning vectors are always inlined into the wrapper of their ISA, so no vector crosses a
// call and GCC's note that such a call's ABI depends on the ISA is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu {
namespace {

using vec::load;
using vec::store;
using vec::Vec;

constexpr int kPoints = 16;  // the 4x4 transformed points of a tile
constexpr int V = 8;         // floats per AVX2 vector
static_assert(V == ImageLayout::kBlock);
// The products' register blocking (16 AVX2 registers): kTiles tiles x kVecs vectors of output channels in
// accumulators, kVecs weight vectors, one broadcast; 12 tiles x 1 vector where the output has 8 channels.
constexpr int kVecs = 2, kTiles = 6, kMaxTiles = 12;
// Backward weights: kRows input channels x kVecs vectors of output channels.
constexpr int kRows = 4;
constexpr int64_t kWinogradMinSide = 7;
// ResNet-18 at 32x32 on AVX2 (batch 64, 1 thread), ms per call here / on oneDNN 2.6.3's direct nChw8c kernels:
// 64 channels at 32x32 forward 21 / 39, backward data 21 / 38, weights 27 / 47; 128 at 16x16 20 / 40, 21 / 38,
// 25 / 43; 256 at 8x8 23 / 39, 23 / 36, 26 / 45 (a step 1943 -> 1404 ms). The narrow ResNet-9's 32 -> 64 at 7x7
// (NHWC in, nChw8c out): 1.5 / 1.8, 1.6 / 1.9, 1.8 / 2.1. 512 channels (4x4 in ResNet-18) stay below kWinogradMinSide.
constexpr int64_t kMaxChannels = 256;
// Backward weights' chunks of tiles. ResNet-18 on AVX2 (batch 64, 1 thread), per call: whole images 64 ms at 64
// channels and 32x32 (oneDNN: 45); 32 KiB chunks 26-28 ms; at 256 channels and 8x8, chunks of 1 tile 55-59 ms
// (oneDNN: 45), of 4 tiles 26, 8 tiles 22-24; at 64 channels 8 tiles cost 32 ms.
constexpr int64_t kChunkBytes = 32 << 10, kMinChunkTiles = 4;
// Forward and backward data take F(4x4, 3x3) (winograd_f4.h) from 8 output pixels a side while its transformed
// weights (36 x ci x co floats, read again for every block of tiles) stay under kF4MaxWeightBytes. AVX2, 1 thread,
// ms per 60 steps of the narrow ResNet-9 (batch 128) F(2x2) / F(4x4): 8 -> 16 at 28x28 forward 131 / 95, backward
// data 123 / 93; 16 -> 16 at 14x14 105 / 89, 102 / 85; 16 -> 32 85 / 80, 90 / 73; but 32 -> 64 at 7x7 91 / 95,
// 95 / 101. ResNet-18 (batch 64), per 12 or 9 calls: 64 at 32x32 253 / 164; 128 at 16x16 197 / 159; 256 at 8x8
// 215 / 302 (9.4 MiB of transformed weights).
constexpr int64_t kF4MinSide = 8, kF4MaxWeightBytes = 5 << 19;

// The tiles of one image: th x tw tiles of m x m outputs (F(2x2, 3x3) or F(4x4, 3x3), winograd_f4.h); the input
// zero-padded to (m th + 2) x (m tw + 2) x c.
struct Tiling {
  int64_t h, w, ci, co;
  int64_t m = 2;
  ImageLayout in() const { return ImageLayout::of(h, w, ci); }
  ImageLayout out() const { return ImageLayout::of(h, w, co); }
  int64_t th() const { return (h + m - 1) / m; }
  int64_t tw() const { return (w + m - 1) / m; }
  int64_t tiles() const { return th() * tw(); }
  int64_t padded_rows() const { return m * th() + 2; }
  int64_t padded_cols() const { return m * tw() + 2; }
};

// One image, zero-padded and NHWC whatever its layout: borders (and the extra row and column of an odd size) zeroed
// once, copy() writes the rest.
class Padded {
 public:
  explicit Padded(const Tiling& t)
      : h_(t.h),
        w_(t.w),
        c_(t.ci),
        m_(t.m),
        cols_(t.padded_cols()),
        layout_(t.in()),
        data_(static_cast<size_t>(t.padded_rows() * t.padded_cols() * t.ci), 0.0f) {}
  void copy(const float* image) {  // (H, W, C) in layout_
    if (layout_.nhwc()) {
      for (int64_t r = 0; r < h_; ++r)
        std::memcpy(data_.data() + ((r + 1) * cols_ + 1) * c_, image + r * w_ * c_,
                    static_cast<size_t>(w_ * c_) * sizeof(float));
      return;
    }
    for (int64_t j = 0; j < c_ / V; ++j)  // reads each block's pixels in order
      for (int64_t r = 0; r < h_; ++r)
        for (int64_t col = 0; col < w_; ++col)
          std::memcpy(data_.data() + ((r + 1) * cols_ + col + 1) * c_ + j * V,
                      image + j * layout_.vec + layout_.at(r, col), V * sizeof(float));
  }
  // The top-left of tile (a, b)'s (m + 2) x (m + 2) patch.
  const float* patch(int64_t a, int64_t b) const { return data_.data() + (m_ * a * cols_ + m_ * b) * c_; }
  int64_t row_floats() const { return cols_ * c_; }

 private:
  int64_t h_, w_, c_, m_, cols_;
  ImageLayout layout_;
  std::vector<float> data_;
};

// v (16, c) = B^T d B of the 4x4 patch at `in` (rows row_floats apart), one vector of channels at a time.
[[gnu::always_inline]] inline void transform_patch(const float* in, int64_t row_floats, int64_t c, float* v) {
  for (int64_t i = 0; i < c; i += V) {
    Vec<V> d[4][4], t[4][4];
    for (int r = 0; r < 4; ++r)
      for (int col = 0; col < 4; ++col) d[r][col] = load<V>(in + r * row_floats + col * c + i);
    for (int col = 0; col < 4; ++col) {
      t[0][col] = d[0][col] - d[2][col];
      t[1][col] = d[1][col] + d[2][col];
      t[2][col] = d[2][col] - d[1][col];
      t[3][col] = d[1][col] - d[3][col];
    }
    for (int r = 0; r < 4; ++r) {
      store<V>(v + (r * 4 + 0) * c + i, t[r][0] - t[r][2]);
      store<V>(v + (r * 4 + 1) * c + i, t[r][1] + t[r][2]);
      store<V>(v + (r * 4 + 2) * c + i, t[r][2] - t[r][1]);
      store<V>(v + (r * 4 + 3) * c + i, t[r][1] - t[r][3]);
    }
  }
}

// m (tiles, P, co) = v (tiles, P, ci) x u (P, ci, co) per point, for kT tiles, kK vectors of co at a time.
template <int kK, int kT, int P>
[[gnu::always_inline]] inline void multiply_block(const float* v, const float* u, int64_t ci, int64_t co, float* m) {
  for (int p = 0; p < P; ++p)
    for (int64_t o = 0; o < co; o += kK * V) {
      Vec<V> acc[kT][kK] = {};
      const float* up = u + p * ci * co + o;
      for (int64_t i = 0; i < ci; ++i) {
        Vec<V> wv[kK];
        for (int k = 0; k < kK; ++k) wv[k] = load<V>(up + i * co + k * V);
        for (int t = 0; t < kT; ++t) {
          const float s = v[(t * P + p) * ci + i];
          for (int k = 0; k < kK; ++k) acc[t][k] += s * wv[k];
        }
      }
      for (int t = 0; t < kT; ++t)
        for (int k = 0; k < kK; ++k) store<V>(m + (t * P + p) * co + o + k * V, acc[t][k]);
    }
}

// The 2x2 outputs A^T m A of tile (a, b) into the image y (H, W, co) laid out as `at`, clipped at an odd size's last
// row or column.
[[gnu::always_inline]] inline void store_tile(const float* m, int64_t co, const Tiling& g, const ImageLayout& at,
                                              int64_t a, int64_t b, float* y) {
  const bool last_row = 2 * a + 1 >= g.h, last_col = 2 * b + 1 >= g.w;
  for (int64_t o = 0; o < co; o += V) {
    float* y00 = y + at.at(2 * a, 2 * b) + o / V * at.vec;
    Vec<V> q0[4], q1[4];
    for (int col = 0; col < 4; ++col) {
      const Vec<V> m0 = load<V>(m + col * co + o), m1 = load<V>(m + (4 + col) * co + o),
                   m2 = load<V>(m + (8 + col) * co + o), m3 = load<V>(m + (12 + col) * co + o);
      q0[col] = m0 + m1 + m2;
      q1[col] = m1 - m2 - m3;
    }
    store<V>(y00, q0[0] + q0[1] + q0[2]);
    if (!last_col) store<V>(y00 + at.pixel, q0[1] - q0[2] - q0[3]);
    if (last_row) continue;
    store<V>(y00 + at.row, q1[0] + q1[1] + q1[2]);
    if (!last_col) store<V>(y00 + at.row + at.pixel, q1[1] - q1[2] - q1[3]);
  }
}

// Asks for `bytes` at `at` while the current image computes: each layer's input was written by the layer before, a
// batch of megabytes, so it comes from memory.
inline void prefetch(const float* at, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(at);
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

struct ImageRange {
  int64_t begin, end;  // images [begin, end)
};

// y (images of r) = conv(x, G g G^T-transformed weights u (P, ci, co)), kT tiles of M x M outputs at a time.
template <int kK, int kT, int M>
[[gnu::always_inline]] inline void forward_images(const Tiling& g, ImageRange r, const float* x, const float* u,
                                                  float* y) {
  constexpr int P = M == 4 ? f4::kPoints : kPoints;
  Padded p(g);
  const ImageLayout out = g.out();
  std::vector<float> v(static_cast<size_t>(kT * P * g.ci), 0.0f), m(static_cast<size_t>(kT * P * g.co));
  const int64_t tiles = g.tiles(), tw = g.tw(), image_floats = g.h * g.w * g.ci;
  const int64_t slice = (image_floats * kT + tiles - 1) / tiles;  // of the next image, per block of tiles
  for (int64_t n = r.begin; n < r.end; ++n) {
    p.copy(x + n * image_floats);
    float* image = y + n * g.h * g.w * g.co;
    for (int64_t t0 = 0; t0 < tiles; t0 += kT) {
      if (n + 1 < r.end) prefetch(x + (n + 1) * image_floats + t0 / kT * slice, slice * 4);
      const int64_t count = std::min<int64_t>(kT, tiles - t0);  // the block's last tiles may be missing: their
      for (int64_t t = 0; t < count; ++t) {                     // products run on stale values and are not stored
        const float* patch = p.patch((t0 + t) / tw, (t0 + t) % tw);
        if constexpr (M == 4)
          f4::transform_patch<V>(patch, p.row_floats(), g.ci, v.data() + t * P * g.ci);
        else
          transform_patch(patch, p.row_floats(), g.ci, v.data() + t * P * g.ci);
      }
      multiply_block<kK, kT, P>(v.data(), u, g.ci, g.co, m.data());
      for (int64_t t = 0; t < count; ++t) {
        const int64_t a = (t0 + t) / tw, b = (t0 + t) % tw;
        if constexpr (M == 4)
          f4::store_tile<V>(m.data() + t * P * g.co, g.co, g.h, g.w, out, a, b, image);
        else
          store_tile(m.data() + t * P * g.co, g.co, g, out, a, b, image);
      }
    }
  }
}

// dm (16, co) = A e A^T of the 2x2 output gradients of tile (a, b) of the image dy (H, W, co) laid out as `at`, zero
// outside it.
[[gnu::always_inline]] inline void transform_gradient(const float* dy, const Tiling& g, const ImageLayout& at,
                                                      int64_t a, int64_t b, float* dm) {
  const bool last_row = 2 * a + 1 >= g.h, last_col = 2 * b + 1 >= g.w;
  for (int64_t o = 0; o < g.co; o += V) {
    const float* e00 = dy + at.at(2 * a, 2 * b) + o / V * at.vec;
    const Vec<V> zero{};
    const Vec<V> e[2][2] = {
        {load<V>(e00), last_col ? zero : load<V>(e00 + at.pixel)},
        {last_row ? zero : load<V>(e00 + at.row), last_row || last_col ? zero : load<V>(e00 + at.row + at.pixel)}};
    Vec<V> f[4][2];
    for (int c = 0; c < 2; ++c) {
      f[0][c] = e[0][c];
      f[1][c] = e[0][c] + e[1][c];
      f[2][c] = e[0][c] - e[1][c];
      f[3][c] = -e[1][c];
    }
    for (int r = 0; r < 4; ++r) {
      store<V>(dm + (r * 4 + 0) * g.co + o, f[r][0]);
      store<V>(dm + (r * 4 + 1) * g.co + o, f[r][0] + f[r][1]);
      store<V>(dm + (r * 4 + 2) * g.co + o, f[r][0] - f[r][1]);
      store<V>(dm + (r * 4 + 3) * g.co + o, -f[r][1]);
    }
  }
}

// du (16, ci, co) += sum over the image's tiles of v (tiles, 16, ci) x dm (tiles, 16, co), per point.
[[gnu::always_inline]] inline void accumulate_products(const float* v, const float* dm, int64_t tiles, int64_t ci,
                                                       int64_t co, float* du) {
  for (int p = 0; p < kPoints; ++p)
    for (int64_t i0 = 0; i0 < ci; i0 += kRows)
      for (int64_t o = 0; o < co; o += kVecs * V) {
        Vec<V> acc[kRows][kVecs] = {};
        for (int64_t t = 0; t < tiles; ++t) {
          Vec<V> d[kVecs];
          for (int k = 0; k < kVecs; ++k) d[k] = load<V>(dm + (t * kPoints + p) * co + o + k * V);
          const float* vs = v + (t * kPoints + p) * ci + i0;
          for (int b = 0; b < kRows; ++b)
            for (int k = 0; k < kVecs; ++k) acc[b][k] += vs[b] * d[k];
        }
        for (int b = 0; b < kRows; ++b)
          for (int k = 0; k < kVecs; ++k) {
            float* at = du + (p * ci + i0 + b) * co + o + k * V;
            store<V>(at, load<V>(at) + acc[b][k]);
          }
      }
}

__attribute__((target("avx2,fma"))) void backward_weights_images(const Tiling& g, ImageRange r, const float* x,
                                                                 const float* dy, float* du) {
  Padded p(g);
  const ImageLayout out = g.out();
  const int64_t tiles = g.tiles(), tw = g.tw();
  // Tiles in chunks whose transforms stay in L1, at least kMinChunkTiles for the sums into du to pay (at 32x32 with 64
  // channels an image's transforms are 2 MiB; with 256 channels du is 4 MiB).
  const int64_t chunk =
      std::clamp<int64_t>(kChunkBytes / (kPoints * (g.ci + g.co) * 4), std::min(kMinChunkTiles, tiles), tiles);
  std::vector<float> v(static_cast<size_t>(chunk * kPoints * g.ci)), dm(static_cast<size_t>(chunk * kPoints * g.co));
  for (int64_t n = r.begin; n < r.end; ++n) {
    p.copy(x + n * g.h * g.w * g.ci);
    const float* grad = dy + n * g.h * g.w * g.co;
    if (n + 1 < r.end) prefetch(x + (n + 1) * g.h * g.w * g.ci, g.h * g.w * g.ci * 4);
    for (int64_t t0 = 0; t0 < tiles; t0 += chunk) {
      const int64_t count = std::min(chunk, tiles - t0);
      for (int64_t t = 0; t < count; ++t) {
        const int64_t a = (t0 + t) / tw, b = (t0 + t) % tw;
        transform_patch(p.patch(a, b), p.row_floats(), g.ci, v.data() + t * kPoints * g.ci);
        transform_gradient(grad, g, out, a, b, dm.data() + t * kPoints * g.co);
      }
      accumulate_products(v.data(), dm.data(), count, g.ci, g.co, du);
    }
  }
}

// u (16, ci, co) = G w G^T per channel pair, w (3, 3, ci, co); with `flip`, of the weights of the transposed
// convolution (backward data): w'(kh, kw, o, i) = w(2 - kh, 2 - kw, i, o), ci and co the forward's.
void transform_weights(const float* w, int64_t ci, int64_t co, bool flip, float* u) {
  const int64_t in = flip ? co : ci, out = flip ? ci : co;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) {
      float k[3][3], t[4][3];
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
          k[r][c] = flip ? w[(((2 - r) * 3 + (2 - c)) * ci + o) * co + i] : w[((r * 3 + c) * ci + i) * co + o];
      for (int c = 0; c < 3; ++c) {
        t[0][c] = k[0][c];
        t[1][c] = 0.5f * (k[0][c] + k[1][c] + k[2][c]);
        t[2][c] = 0.5f * (k[0][c] - k[1][c] + k[2][c]);
        t[3][c] = k[2][c];
      }
      for (int r = 0; r < 4; ++r) {
        const float row[4] = {t[r][0], 0.5f * (t[r][0] + t[r][1] + t[r][2]), 0.5f * (t[r][0] - t[r][1] + t[r][2]),
                              t[r][2]};
        for (int c = 0; c < 4; ++c) u[((r * 4 + c) * in + i) * out + o] = row[c];
      }
    }
}

// dw (3, 3, ci, co) = G^T du G per channel pair.
void untransform_weight_gradient(const float* du, int64_t ci, int64_t co, float* dw) {
  for (int64_t i = 0; i < ci; ++i)
    for (int64_t o = 0; o < co; ++o) {
      double d[4][4], t[3][4];
      for (int p = 0; p < kPoints; ++p) d[p / 4][p % 4] = du[(p * ci + i) * co + o];
      for (int c = 0; c < 4; ++c) {
        t[0][c] = d[0][c] + 0.5 * (d[1][c] + d[2][c]);
        t[1][c] = 0.5 * (d[1][c] - d[2][c]);
        t[2][c] = 0.5 * (d[1][c] + d[2][c]) + d[3][c];
      }
      for (int r = 0; r < 3; ++r) {
        const double row[3] = {t[r][0] + 0.5 * (t[r][1] + t[r][2]), 0.5 * (t[r][1] - t[r][2]),
                               0.5 * (t[r][1] + t[r][2]) + t[r][3]};
        for (int c = 0; c < 3; ++c) dw[((r * 3 + c) * ci + i) * co + o] = static_cast<float>(row[c]);
      }
    }
}

int threads_for(int64_t images) { return std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(images))); }

void refuse_unless(bool runs_here, const ConvGeometry& g, const char* pass) {
  if (!runs_here)
    throw InvalidArgument(std::string("winograd conv: ") + g.input_shape().str() + " -> " + g.output_shape().str() +
                          " has no hand-written " + pass + " on this CPU");
}

__attribute__((target("avx2,fma"))) void forward_avx2(const Tiling& t, ImageRange r, const float* x, const float* u,
                                                      float* y) {
  if (t.m == 4) {
    if (t.co % (kVecs * V) == 0) return forward_images<kVecs, kTiles, 4>(t, r, x, u, y);
    return forward_images<1, kMaxTiles, 4>(t, r, x, u, y);
  }
  if (t.co % (kVecs * V) == 0) return forward_images<kVecs, kTiles, 2>(t, r, x, u, y);
  forward_images<1, kMaxTiles, 2>(t, r, x, u, y);
}

// u = the transformed weights for tiles of m outputs a side (flip: of backward data's transposed convolution).
std::vector<float> transformed_weights(const ConvGeometry& g, int64_t m, bool flip, const float* w) {
  std::vector<float> u(static_cast<size_t>((m == 4 ? f4::kPoints : kPoints) * g.c_in * g.c_out));
  if (m == 4)
    f4::transform_weights(w, g.c_in, g.c_out, flip, u.data());
  else
    transform_weights(w, g.c_in, g.c_out, flip, u.data());
  return u;
}

void forward_with(const ConvGeometry& g, const Tiling& t, const float* x, const float* u, float* y) {
  const int threads = threads_for(g.n);
#pragma omp parallel num_threads(threads)
  {
    const int k = omp_get_thread_num(), n = omp_get_num_threads();
    forward_avx2(t, {g.n * k / n, g.n * (k + 1) / n}, x, u, y);
  }
}

}  // namespace

bool winograd_by_hand(const ConvGeometry& g) {
  return hand_avx2_kernels() && g.kh == 3 && g.kw == 3 && g.stride == 1 && g.pad == 1 && g.c_in % V == 0 &&
         g.c_out % (kVecs * V) == 0 && std::max(g.c_in, g.c_out) <= kMaxChannels &&
         std::min(g.h, g.w) >= kWinogradMinSide;
}

int64_t winograd_tile_outputs(const ConvGeometry& g) {
  const bool f4 = std::min(g.out_h(), g.out_w()) >= kF4MinSide &&
                  f4::kPoints * g.c_in * g.c_out * int64_t{sizeof(float)} <= kF4MaxWeightBytes;
  return f4 ? 4 : 2;
}

bool winograd_backward_weights_by_hand(const ConvGeometry& g) { return winograd_by_hand(g) && g.c_in >= 16; }

void winograd_forward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  refuse_unless(winograd_by_hand(g), g, "forward");
  const int64_t m = winograd_tile_outputs(g);
  const std::vector<float> u = transformed_weights(g, m, false, w);
  forward_with(g, {g.h, g.w, g.c_in, g.c_out, m}, x, u.data(), y);
}

void winograd_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  refuse_unless(winograd_by_hand(g), g, "backward data");
  const int64_t m = winograd_tile_outputs(g);
  const std::vector<float> u = transformed_weights(g, m, true, w);
  forward_with(g, {g.h, g.w, g.c_out, g.c_in, m}, dy, u.data(), dx);
}

void winograd_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  refuse_unless(winograd_backward_weights_by_hand(g), g, "backward weights");
  const Tiling t{g.h, g.w, g.c_in, g.c_out};
  const int threads = threads_for(g.n);
  const size_t per = static_cast<size_t>(kPoints * g.c_in * g.c_out);
  std::vector<float> du(per * static_cast<size_t>(threads), 0.0f);
#pragma omp parallel num_threads(threads)
  {
    const int k = omp_get_thread_num(), n = omp_get_num_threads();
    backward_weights_images(t, {g.n * k / n, g.n * (k + 1) / n}, x, dy, du.data() + per * k);
  }
  for (int k = 1; k < threads; ++k)
    for (size_t i = 0; i < per; ++i) du[i] += du[per * k + i];
  untransform_weight_gradient(du.data(), g.c_in, g.c_out, dw);
}

}  // namespace torus::worker::cpu

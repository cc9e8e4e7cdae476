#pragma once
// Winograd F(4x4, 3x3) for winograd.cc's forward and backward data: 6x6 input patches, 36 transformed points, 4x4
// outputs a tile, with Lavin and Gray's matrices (points 0, +-1, +-2). 36 products per 16 outputs and channel pair
// where F(2x2, 3x3) takes 64: 44% fewer, for transforms of about the same cost per output. Internal to winograd.cc
// (compiled there, for its ISA: every function is always inlined into its AVX2 wrapper).
#include <cstdint>

#include "worker/backend/cpu/image_layout.h"
#include "worker/backend/cpu/vec.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu::f4 {

using vec::load;
using vec::store;
using vec::Vec;

constexpr int kSide = 6, kPoints = 36, kOut = 4;

// out = B^T d over 6 values: 4 d0 - 5 d2 + d4, -4 d1 - 4 d2 + d3 + d4, 4 d1 - 4 d2 - d3 + d4, -2 d1 - d2 + 2 d3 + d4,
// 2 d1 - d2 - 2 d3 + d4, 4 d1 - 5 d3 + d5.
template <int V>
[[gnu::always_inline]] inline void input_1d(const Vec<V> (&d)[6], Vec<V> (&out)[6]) {
  const Vec<V> a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1], c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
  out[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
  out[1] = a + b;
  out[2] = a - b;
  out[3] = c + e;
  out[4] = c - e;
  out[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
}

// y = A^T m over 6 values: m0 + m1 + m2 + m3 + m4, m1 - m2 + 2 (m3 - m4), m1 + m2 + 4 (m3 + m4),
// m1 - m2 + 8 (m3 - m4) + m5.
template <int V>
[[gnu::always_inline]] inline void output_1d(const Vec<V> (&m)[6], Vec<V> (&y)[4]) {
  const Vec<V> p = m[1] + m[2], q = m[1] - m[2], r = m[3] + m[4], s = m[3] - m[4];
  y[0] = m[0] + p + r;
  y[1] = q + 2.0f * s;
  y[2] = p + 4.0f * r;
  y[3] = q + 8.0f * s + m[5];
}

// v (36, c) = B^T d B of the 6x6 patch at `in` (rows row_floats apart, pixels c apart), one vector of channels at a
// time.
template <int V>
[[gnu::always_inline]] inline void transform_patch(const float* in, int64_t row_floats, int64_t c, float* v) {
  for (int64_t i = 0; i < c; i += V) {
    Vec<V> t[6][6];
    for (int col = 0; col < kSide; ++col) {
      Vec<V> d[6], out[6];
      for (int r = 0; r < kSide; ++r) d[r] = load<V>(in + r * row_floats + col * c + i);
      input_1d<V>(d, out);
      for (int r = 0; r < kSide; ++r) t[r][col] = out[r];
    }
    for (int r = 0; r < kSide; ++r) {
      Vec<V> out[6];
      input_1d<V>(t[r], out);
      for (int k = 0; k < kSide; ++k) store<V>(v + (r * kSide + k) * c + i, out[k]);
    }
  }
}

// The 4x4 outputs A^T m A of tile (a, b) into the image y (h, w, co) laid out as `at`, clipped at its last rows and
// columns.
template <int V>
[[gnu::always_inline]] inline void store_tile(const float* m, int64_t co, int64_t h, int64_t w, const ImageLayout& at,
                                              int64_t a, int64_t b, float* y) {
  const int rows = static_cast<int>(h - kOut * a < kOut ? h - kOut * a : kOut);
  const int cols = static_cast<int>(w - kOut * b < kOut ? w - kOut * b : kOut);
  for (int64_t o = 0; o < co; o += V) {
    Vec<V> q[4][6];
    for (int col = 0; col < kSide; ++col) {
      Vec<V> mm[6], out[4];
      for (int r = 0; r < kSide; ++r) mm[r] = load<V>(m + (r * kSide + col) * co + o);
      output_1d<V>(mm, out);
      for (int k = 0; k < kOut; ++k) q[k][col] = out[k];
    }
    float* y00 = y + at.at(kOut * a, kOut * b) + o / V * at.vec;
    for (int k = 0; k < rows; ++k) {
      Vec<V> out[4];
      output_1d<V>(q[k], out);
      for (int j = 0; j < cols; ++j) store<V>(y00 + k * at.row + j * at.pixel, out[j]);
    }
  }
}

// u (36, ci, co) = G w G^T per channel pair, w (3, 3, ci, co); with `flip`, of the weights of the transposed
// convolution (backward data): w'(kh, kw, o, i) = w(2 - kh, 2 - kw, i, o), ci and co the forward's.
inline void transform_weights(const float* w, int64_t ci, int64_t co, bool flip, float* u) {
  // G g over 3 values: g0 / 4, -(g0 + g1 + g2) / 6, -(g0 - g1 + g2) / 6, g0 / 24 + g1 / 12 + g2 / 6,
  // g0 / 24 - g1 / 12 + g2 / 6, g2.
  const auto g6 = [](const double(&g)[3], double(&out)[6]) {
    out[0] = g[0] / 4;
    out[1] = -(g[0] + g[1] + g[2]) / 6;
    out[2] = -(g[0] - g[1] + g[2]) / 6;
    out[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;
    out[4] = g[0] / 24 - g[1] / 12 + g[2] / 6;
    out[5] = g[2];
  };
  const int64_t in = flip ? co : ci, out = flip ? ci : co;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double t[6][3];
      for (int c = 0; c < 3; ++c) {
        double col[3], g[6];
        for (int r = 0; r < 3; ++r)
          col[r] = flip ? w[(((2 - r) * 3 + (2 - c)) * ci + o) * co + i] : w[((r * 3 + c) * ci + i) * co + o];
        g6(col, g);
        for (int r = 0; r < kSide; ++r) t[r][c] = g[r];
      }
      for (int r = 0; r < kSide; ++r) {
        double row[6];
        g6(t[r], row);
        for (int c = 0; c < kSide; ++c) u[((r * kSide + c) * in + i) * out + o] = static_cast<float>(row[c]);
      }
    }
}

}  // namespace torus::worker::cpu::f4

#pragma GCC diagnostic pop

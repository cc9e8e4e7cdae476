#pragma once
// A naive convolution in double precision: the reference the CPU backend's convolution tests compare with
// (cpu_backend_test.cc: oneDNN's strided 1x1 kernels; staging_test.cc: the channel-blocked layout).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::test {

struct ConvReference {
  std::vector<double> y, dx, dw;
};

// (N, H, W, C) activations, (O, I, kh, kw) weights: y = conv(x, w); dx = conv^T(dy, w); dw = sum x * dy.
inline ConvReference conv_reference(const ConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& dy) {
  ConvReference r{std::vector<double>(g.output_shape().numel()), std::vector<double>(g.input_shape().numel()),
                  std::vector<double>(g.weight_shape().numel())};
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.out_h(); ++oh)
      for (int64_t ow = 0; ow < g.out_w(); ++ow)
        for (int64_t kh = 0; kh < g.kh; ++kh)
          for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t ih = oh * g.stride - g.pad + kh, iw = ow * g.stride - g.pad + kw;
            if (ih < 0 || iw < 0 || ih >= g.h || iw >= g.w) continue;
            for (int64_t o = 0; o < g.c_out; ++o) {
              const int64_t yi = ((n * g.out_h() + oh) * g.out_w() + ow) * g.c_out + o;
              for (int64_t i = 0; i < g.c_in; ++i) {
                const int64_t xi = ((n * g.h + ih) * g.w + iw) * g.c_in + i;
                const int64_t wi = ((o * g.c_in + i) * g.kh + kh) * g.kw + kw;
                r.y[yi] += double(x[xi]) * w[wi];
                r.dx[xi] += double(dy[yi]) * w[wi];
                r.dw[wi] += double(x[xi]) * dy[yi];
              }
            }
          }
  return r;
}

// n floats uniform in [-1, 1).
inline std::vector<float> uniform_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(rng);
  return v;
}

// 3x3 weights between the reference's (O, I, kh, kw) and the hand-written loops' (kh, kw, I, O), oneDNN's hwio.
inline size_t hwio_index(const ConvGeometry& g, int64_t o, int64_t i, int64_t tap) {
  return static_cast<size_t>((tap * g.c_in + i) * g.c_out + o);
}
inline std::vector<float> hwio(const ConvGeometry& g, const std::vector<float>& oihw) {
  std::vector<float> out(oihw.size());
  for (int64_t o = 0; o < g.c_out; ++o)
    for (int64_t i = 0; i < g.c_in; ++i)
      for (int64_t tap = 0; tap < 9; ++tap) out[hwio_index(g, o, i, tap)] = oihw[(o * g.c_in + i) * 9 + tap];
  return out;
}
inline std::vector<float> oihw(const ConvGeometry& g, const std::vector<float>& hwio) {
  std::vector<float> out(hwio.size());
  for (int64_t o = 0; o < g.c_out; ++o)
    for (int64_t i = 0; i < g.c_in; ++i)
      for (int64_t tap = 0; tap < 9; ++tap) out[(o * g.c_in + i) * 9 + tap] = hwio[hwio_index(g, o, i, tap)];
  return out;
}

// fp32 against the double reference, relative to its magnitude.
inline void expect_near(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

// Each output of a convolution is a sum of `terms` products (kh x kw x the channels reduced) of values in [-1, 1):
// fp32's rounding, and a Winograd transform's (F(4x4, 3x3) multiplies by up to 8 and divides by 24), grow with the
// square root of their number, whatever the sum's value.
inline void expect_sum_near(const std::vector<float>& got, const std::vector<double>& want, int64_t terms,
                            const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double scale = 1e-5 * std::sqrt(static_cast<double>(terms));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], scale * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

// A parameterized test's case: a 3x3 convolution of n images h x w, c_in -> c_out channels, run on `threads` threads;
// case_name is its test name ("n3_28x28_8to16_threads2").
struct ConvCase {
  int64_t n, h, w, c_in, c_out;
  int threads;
};
inline std::string case_name(const ::testing::TestParamInfo<ConvCase>& info) {
  const ConvCase& c = info.param;
  return "n" + std::to_string(c.n) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) + "_" +
         std::to_string(c.c_in) + "to" + std::to_string(c.c_out) + "_threads" + std::to_string(c.threads);
}

// An (N, H, W, C) activation between NHWC and the CPU backend's own layout (cpu/staging.h: channel-blocked from 64
// channels on): written out here rather than through oneDNN's reorder, so that a wrong layout in the kernels cannot
// hide behind the same mistake in the conversion.
inline std::vector<float> own_layout(const std::vector<float>& from, int64_t h, int64_t w, int64_t c,
                                     cpu::StageDirection direction) {
  if (!cpu::blocked_channels(c)) return from;
  const int64_t b = cpu::channel_block(), n = static_cast<int64_t>(from.size()) / (h * w * c);
  std::vector<float> to(from.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        const auto plain = static_cast<size_t>((i * h * w + p) * c + ch),
                   own = static_cast<size_t>(((i * (c / b) + ch / b) * h * w + p) * b + ch % b);
        if (direction == cpu::StageDirection::kIn)
          to[own] = from[plain];
        else
          to[plain] = from[own];
      }
  return to;
}

}  // namespace torus::worker::test

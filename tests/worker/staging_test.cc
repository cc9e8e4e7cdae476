// Convolutions on the CPU backend's activation layouts (worker/backend/cpu/staging.h: nChw8c from 64 channels on,
// NHWC below) against a naive reference: forward, backward data and backward weights, with padding, strides and a
// batch or image size other than the one the weights were laid out for; blocked on both sides, narrow on both
// sides, and mixed (an NHWC input feeding a blocked output, as the stem and a narrow stage's successor do).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/worker/conv_reference.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker {
void PrintTo(const ConvGeometry& g, std::ostream* os) {
  *os << g.input_shape().str() << " -> " << g.c_out << " k" << g.kh << " s" << g.stride << " p" << g.pad;
}
}  // namespace torus::worker

namespace torus::worker::cpu {
namespace {

using test::conv_reference;
using test::expect_near;
using test::expect_sum_near;

class WideConv : public ::testing::TestWithParam<ConvGeometry> {};

TEST_P(WideConv, MatchesTheReference) {
  const ConvGeometry layout = GetParam();
  ConvGeometry g = layout;  // run at another batch and image size than the weights were laid out for
  g.n = layout.n + 1;
  g.h = layout.h + 1;
  g.w = layout.w + 2;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = u(rng);
    return v;
  };
  const std::vector<float> x = random(g.input_shape().numel()), w = random(g.weight_shape().numel()),
                           dy = random(g.output_shape().numel());
  auto backend = make_cpu_backend(1);
  const auto native_elements = static_cast<int64_t>(backend->conv_weight_elements(layout));
  Buffer wn = backend->allocate(native_elements * 4), dwn = backend->allocate(native_elements * 4);
  Tensor native_w(wn.data(), {native_elements}), native_dw(dwn.data(), {native_elements});
  backend->conv_weight_import(layout, w.data(), native_w);
  // The activations in the backend's layout for their channel count (blocked from 64 channels on).
  std::vector<float> xs(x.size()), dys(dy.size()), ys(dy.size()), dxs(x.size());
  Tensor tx(xs.data(), g.input_shape()), tdy(dys.data(), g.output_shape()), ty(ys.data(), g.output_shape()),
      tdx(dxs.data(), g.input_shape());
  backend->activation_import(x.data(), tx);
  backend->activation_import(dy.data(), tdy);
  const std::vector<float> xs_before = xs, dys_before = dys;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the plans and staging buffers
    backend->conv_forward(g, tx, native_w, ty);
    backend->conv_backward_weights(g, tx, tdy, native_dw);
    backend->conv_backward_data(g, tdy, native_w, tdx);
  }
  backend->synchronize();
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size());
  backend->activation_export(ty, y.data());
  backend->activation_export(tdx, dx.data());
  backend->conv_weight_export(layout, native_dw, dw.data());
  EXPECT_EQ(xs, xs_before);  // inputs untouched
  EXPECT_EQ(dys, dys_before);
  const test::ConvReference r = conv_reference(g, x, w, dy);
  expect_sum_near(y, r.y, g.kh * g.kw * g.c_in, "y");  // AVX2 runs F(4x4, 3x3) Winograd for some (winograd.h)
  expect_sum_near(dx, r.dx, g.kh * g.kw * g.c_out, "dx");
  expect_near(dw, r.dw, "dw");
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, WideConv,
    ::testing::Values(
        ConvGeometry{
            .n = 2, .h = 5, .w = 5, .c_in = 64, .c_out = 64, .kh = 3, .kw = 3, .stride = 1, .pad = 1},  // ResNet-18
                                                                                                        // stage 1
        ConvGeometry{
            .n = 1, .h = 6, .w = 6, .c_in = 64, .c_out = 128, .kh = 3, .kw = 3, .stride = 2, .pad = 1},  // a stage's
                                                                                                         // first conv
        // 3x3 stride 1 runs Winograd on AVX-512 (impl_choice.h): a stem from 3 channels, a wide layer
        ConvGeometry{.n = 2, .h = 12, .w = 12, .c_in = 3, .c_out = 64, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
        ConvGeometry{.n = 2, .h = 10, .w = 10, .c_in = 128, .c_out = 128, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
        ConvGeometry{
            .n = 1, .h = 6, .w = 6, .c_in = 64, .c_out = 128, .kh = 1, .kw = 1, .stride = 2, .pad = 0},  // its shortcut
        ConvGeometry{.n = 1,
                     .h = 3,
                     .w = 3,
                     .c_in = 64,
                     .c_out = 64,
                     .kh = 3,
                     .kw = 3,
                     .stride = 1,
                     .pad = 1},  // laid out at 3x3, run at 4x5
        ConvGeometry{
            .n = 2, .h = 4, .w = 4, .c_in = 16, .c_out = 32, .kh = 3, .kw = 3, .stride = 1, .pad = 1},  // narrow: stays
                                                                                                        // on NHWC
        ConvGeometry{.n = 2,
                     .h = 5,
                     .w = 5,
                     .c_in = 3,
                     .c_out = 64,
                     .kh = 3,
                     .kw = 3,
                     .stride = 1,
                     .pad = 1},  // the stem: NHWC images in, blocked out
        ConvGeometry{.n = 2,
                     .h = 4,
                     .w = 4,
                     .c_in = 32,
                     .c_out = 64,
                     .kh = 3,
                     .kw = 3,
                     .stride = 1,
                     .pad = 1},  // narrow ResNet-9's last stage: NHWC in, blocked out
        // Laid out at 6x6 (oneDNN's weight layout: below winograd.h's 7 pixels a side), run at 7x8, where AVX2 would
        // take Winograd, which reads hwio weights: the backend keeps it on oneDNN.
        ConvGeometry{.n = 1, .h = 6, .w = 6, .c_in = 32, .c_out = 64, .kh = 3, .kw = 3, .stride = 1, .pad = 1}),
    [](const auto& param_info) {
      const ConvGeometry& g = param_info.param;
      return "ic" + std::to_string(g.c_in) + "_oc" + std::to_string(g.c_out) + "_" + std::to_string(g.h) + "px_k" +
             std::to_string(g.kh) + "s" + std::to_string(g.stride);
    });

}  // namespace
}  // namespace torus::worker::cpu

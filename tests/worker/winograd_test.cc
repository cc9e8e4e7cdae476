// The hand-written Winograd F(2x2, 3x3) convolutions (worker/backend/cpu/winograd.h) against the double reference:
// forward, backward data and backward weights on the narrow ResNet-9's channel pairs and ResNet-18's, on even and odd
// sides (a last tile half outside the image), on 1 and 2 threads (backward weights sums per thread), with activations
// in their own layouts (staging.h: NHWC below 64 channels, channel-blocked from 64 on, either side or both). They run
// where oneDNN runs avx2 but not avx512_core: CTest runs this file under ONEDNN_MAX_CPU_ISA=AVX2 too, and on an AVX-512
// machine the plain run checks that they are refused instead. The backend routes through them: narrow_conv_test.cc's
// TheBackendsThreePassesMatchTheReference.
#include "worker/backend/cpu/winograd.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "tests/worker/conv_reference.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {
namespace {

using Case = test::ConvCase;
using test::conv_reference;
using test::expect_sum_near;
using test::hwio;
using test::oihw;
using test::own_layout;
using test::uniform_floats;

class Winograd : public ::testing::TestWithParam<Case> {};

bool avx2_machine() { return dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core; }

TEST_P(Winograd, EveryPassMatchesTheReference) {
  const Case c = GetParam();
  const ConvGeometry g{.n = c.n, .h = c.h, .w = c.w, .c_in = c.c_in, .c_out = c.c_out, .kh = 3, .kw = 3, .pad = 1};
  if (!avx2_machine()) {
    EXPECT_FALSE(winograd_by_hand(g)) << "on AVX-512 narrow_conv.h and oneDNN run these";
    GTEST_SKIP() << "Winograd runs where oneDNN runs avx2 but not avx512_core";
  }
  ASSERT_TRUE(winograd_by_hand(g));
  std::mt19937 rng(static_cast<unsigned>(c.h * 31 + c.c_in));
  const std::vector<float> x = uniform_floats(g.input_shape().numel(), rng),
                           w = uniform_floats(g.weight_shape().numel(), rng),
                           dy = uniform_floats(g.output_shape().numel(), rng);
  const test::ConvReference r = conv_reference(g, x, w, dy);
  const std::vector<float> wt = hwio(g, w);
  const std::vector<float> x_own = own_layout(x, g.h, g.w, g.c_in, StageDirection::kIn),
                           dy_own = own_layout(dy, g.h, g.w, g.c_out, StageDirection::kIn);
  omp_set_num_threads(c.threads);
  std::vector<float> y(dy.size(), -7.0f), dx(x.size(), -7.0f), dw(w.size(), -7.0f);
  winograd_forward(g, x_own.data(), wt.data(), y.data());
  expect_sum_near(own_layout(y, g.h, g.w, g.c_out, StageDirection::kOut), r.y, 9 * g.c_in, "y");
  winograd_backward_data(g, dy_own.data(), wt.data(), dx.data());
  expect_sum_near(own_layout(dx, g.h, g.w, g.c_in, StageDirection::kOut), r.dx, 9 * g.c_out, "dx");
  if (winograd_backward_weights_by_hand(g)) {
    winograd_backward_weights(g, x_own.data(), dy_own.data(), dw.data());
    // A sum over every pixel of the batch: its rounding grows with their number.
    const std::vector<float> got = oihw(g, dw);
    const double scale = std::sqrt(static_cast<double>(g.n * g.h * g.w));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], r.dw[i], 1e-5 * scale * (1 + std::abs(r.dw[i]))) << "dw[" << i << "]";
  }
  omp_set_num_threads(1);
}

INSTANTIATE_TEST_SUITE_P(Geometries, Winograd,
                         ::testing::Values(Case{3, 28, 28, 8, 16, 1}, Case{2, 28, 28, 8, 16, 2},
                                           Case{3, 14, 14, 16, 16, 1}, Case{2, 14, 14, 16, 32, 2},
                                           Case{2, 7, 9, 16, 32, 1}, Case{3, 9, 7, 16, 16, 2},
                                           Case{2, 8, 11, 32, 32, 1}, Case{5, 7, 7, 8, 16, 2},
                                           // One side channel-blocked, then both: ResNet-9's 32 -> 64 at 7x7, the
                                           // transpose of it, ResNet-18's 64, 128 and 256 channels.
                                           Case{3, 7, 7, 32, 64, 2}, Case{2, 9, 8, 64, 32, 1},
                                           Case{2, 11, 10, 64, 64, 2}, Case{1, 8, 8, 128, 128, 1},
                                           Case{1, 7, 8, 256, 256, 1}),
                         test::case_name);

TEST(WinogradChoice, TakesOnlyThreeByThreeStrideOneLayersOfSevenPixelsOrMoreAndUpTo256Channels) {
  const ConvGeometry first{.n = 128, .h = 28, .w = 28, .c_in = 8, .c_out = 16, .kh = 3, .kw = 3, .pad = 1};
  EXPECT_EQ(winograd_by_hand(first), avx2_machine());
  EXPECT_FALSE(winograd_backward_weights_by_hand(first)) << "8 input channels: oneDNN's is as fast";
  ConvGeometry blocked = first;  // the channel-blocked layout on the output side (staging.h)
  blocked.c_in = 32;
  blocked.c_out = 64;
  EXPECT_EQ(winograd_by_hand(blocked), avx2_machine());
  // F(4x4, 3x3) from 8 output pixels a side while its transformed weights fit (128 x 128: 2.25 MiB), else F(2x2).
  EXPECT_EQ(winograd_tile_outputs(first), 4);
  ConvGeometry seven = blocked, wide128 = first, wide256 = first;
  seven.h = seven.w = 7;
  wide128.h = wide128.w = wide256.h = wide256.w = 8;
  wide128.c_in = wide128.c_out = 128;
  wide256.c_in = wide256.c_out = 256;
  EXPECT_EQ(winograd_tile_outputs(seven), 2);
  EXPECT_EQ(winograd_tile_outputs(wide128), 4);
  EXPECT_EQ(winograd_tile_outputs(wide256), 2);
  ConvGeometry strided = first, pointwise = first, unpadded = first, stem = first, wide = first, small = first;
  strided.stride = 2;
  pointwise.kh = pointwise.kw = 1;
  pointwise.pad = 0;
  unpadded.pad = 0;
  stem.c_in = 1;
  wide.c_in = wide.c_out = 512;  // its transformed weights (16 MiB) would leave the cache for every few tiles
  small.h = small.w = 3;
  for (const ConvGeometry& g : {strided, pointwise, unpadded, stem, wide, small})
    EXPECT_FALSE(winograd_by_hand(g)) << g.input_shape().str() << " -> " << g.output_shape().str();
  std::vector<float> buf(1);  // refused before any element is read
  EXPECT_THROW(winograd_forward(stem, buf.data(), buf.data(), buf.data()), InvalidArgument);
  EXPECT_THROW(winograd_backward_data(small, buf.data(), buf.data(), buf.data()), InvalidArgument);
  EXPECT_THROW(winograd_backward_weights(first, buf.data(), buf.data(), buf.data()), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

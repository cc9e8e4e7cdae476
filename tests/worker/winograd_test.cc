// The hand-written Winograd F(2x2, 3x3) convolutions (worker/backend/cpu/winograd.h) against the double reference:
// forward, backward data and backward weights on the narrow ResNet-9's channel pairs, on even and odd sides (a last
// tile half outside the image), on 1 and 2 threads (backward weights sums per thread). They run where oneDNN runs
// avx2 but not avx512_core: CTest runs this file under ONEDNN_MAX_CPU_ISA=AVX2 too, and on an AVX-512 machine the
// plain run checks that they are refused instead. The backend routes through them: narrow_conv_test.cc's
// TheBackendsThreePassesMatchTheReference.
#include "worker/backend/cpu/winograd.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "tests/worker/conv_reference.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {
namespace {

using test::conv_reference;
using test::expect_near;
using test::hwio;
using test::oihw;
using test::uniform_floats;

struct Case {
  int64_t n, h, w, c_in, c_out;
  int threads;
};

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
  omp_set_num_threads(c.threads);
  std::vector<float> y(dy.size(), -7.0f), dx(x.size(), -7.0f), dw(w.size(), -7.0f);
  winograd_forward(g, x.data(), wt.data(), y.data());
  expect_near(y, r.y, "y");
  winograd_backward_data(g, dy.data(), wt.data(), dx.data());
  expect_near(dx, r.dx, "dx");
  if (winograd_backward_weights_by_hand(g)) {
    winograd_backward_weights(g, x.data(), dy.data(), dw.data());
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
                                           Case{2, 8, 11, 32, 32, 1}, Case{5, 7, 7, 8, 16, 2}),
                         [](const auto& param_info) {
                           const Case& c = param_info.param;
                           return "n" + std::to_string(c.n) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) +
                                  "_" + std::to_string(c.c_in) + "to" + std::to_string(c.c_out) + "_threads" +
                                  std::to_string(c.threads);
                         });

TEST(WinogradChoice, TakesOnlyThreeByThreeStrideOneNarrowLayersOfSevenPixelsOrMore) {
  const ConvGeometry first{.n = 128, .h = 28, .w = 28, .c_in = 8, .c_out = 16, .kh = 3, .kw = 3, .pad = 1};
  EXPECT_EQ(winograd_by_hand(first), avx2_machine());
  EXPECT_FALSE(winograd_backward_weights_by_hand(first)) << "8 input channels: oneDNN's is as fast";
  ConvGeometry strided = first, pointwise = first, unpadded = first, stem = first, blocked = first, small = first;
  strided.stride = 2;
  pointwise.kh = pointwise.kw = 1;
  pointwise.pad = 0;
  unpadded.pad = 0;
  stem.c_in = 1;
  blocked.c_in = 32;
  blocked.c_out = 64;  // the channel-blocked layout (staging.h)
  small.h = small.w = 3;
  for (const ConvGeometry& g : {strided, pointwise, unpadded, stem, blocked, small})
    EXPECT_FALSE(winograd_by_hand(g)) << g.input_shape().str() << " -> " << g.output_shape().str();
  std::vector<float> buf(1);  // refused before any element is read
  EXPECT_THROW(winograd_forward(stem, buf.data(), buf.data(), buf.data()), InvalidArgument);
  EXPECT_THROW(winograd_backward_data(small, buf.data(), buf.data(), buf.data()), InvalidArgument);
  EXPECT_THROW(winograd_backward_weights(first, buf.data(), buf.data(), buf.data()), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

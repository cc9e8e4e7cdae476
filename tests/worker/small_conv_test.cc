// The hand-written backward weights of 3x3 convolutions on small images (worker/backend/cpu/small_conv.h) against the
// double reference: the narrow ResNet-9's 64 -> 64 at 3x3 and other channel pairs, square and oblong images of 1 to 6
// pixels a side, activations in their own layouts (NHWC below 64 channels, channel-blocked from 64 on, either side),
// 1 and 2 threads (each sums its images, then in thread order). It runs where oneDNN runs avx2 but not avx512_core:
// CTest runs this file under ONEDNN_MAX_CPU_ISA=AVX2 too, and on an AVX-512 machine the plain run checks that it is
// refused instead. The backend routes through it: staging_test.cc's 64-channel layers at 3x3 to 6x7.
#include "worker/backend/cpu/small_conv.h"

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
using test::oihw;
using test::own_layout;
using test::uniform_floats;

class SmallConv : public ::testing::TestWithParam<Case> {};

bool avx2_machine() { return dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core; }

TEST_P(SmallConv, BackwardWeightsMatchesTheReference) {
  const Case c = GetParam();
  const ConvGeometry g{.n = c.n, .h = c.h, .w = c.w, .c_in = c.c_in, .c_out = c.c_out, .kh = 3, .kw = 3, .pad = 1};
  if (!avx2_machine()) {
    EXPECT_FALSE(small_conv_weights_by_hand(g)) << "on AVX-512 oneDNN runs it";
    GTEST_SKIP() << "small_conv runs where oneDNN runs avx2 but not avx512_core";
  }
  ASSERT_TRUE(small_conv_weights_by_hand(g));
  std::mt19937 rng(static_cast<unsigned>(c.h * 37 + c.w * 5 + c.c_in));
  const std::vector<float> x = uniform_floats(g.input_shape().numel(), rng),
                           w = uniform_floats(g.weight_shape().numel(), rng),
                           dy = uniform_floats(g.output_shape().numel(), rng);
  const test::ConvReference r = conv_reference(g, x, w, dy);
  omp_set_num_threads(c.threads);
  std::vector<float> dw(w.size(), -7.0f);
  small_conv_backward_weights(g, own_layout(x, g.h, g.w, g.c_in, StageDirection::kIn).data(),
                              own_layout(dy, g.h, g.w, g.c_out, StageDirection::kIn).data(), dw.data());
  omp_set_num_threads(1);
  const std::vector<float> got = oihw(g, dw);
  const double scale = std::sqrt(static_cast<double>(g.n * g.h * g.w));  // a sum over every pixel of the batch
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], r.dw[i], 1e-5 * scale * (1 + std::abs(r.dw[i]))) << "dw[" << i << "]";
}

INSTANTIATE_TEST_SUITE_P(Geometries, SmallConv,
                         ::testing::Values(Case{5, 3, 3, 64, 64, 1}, Case{4, 3, 3, 64, 64, 2}, Case{3, 1, 1, 64, 64, 1},
                                           Case{2, 2, 5, 32, 64, 2}, Case{3, 6, 4, 64, 32, 1}, Case{2, 4, 4, 4, 16, 1},
                                           Case{2, 3, 6, 128, 128, 2}, Case{1, 2, 2, 256, 256, 1}),
                         test::case_name);

TEST(SmallConvChoice, TakesThreeByThreeStrideOneLayersUnderSevenPixels) {
  const ConvGeometry first{.n = 128, .h = 3, .w = 3, .c_in = 64, .c_out = 64, .kh = 3, .kw = 3, .pad = 1};
  EXPECT_EQ(small_conv_weights_by_hand(first), avx2_machine());
  ConvGeometry strided = first, pointwise = first, unpadded = first, stem = first, wide = first, large = first,
               odd_out = first;
  strided.stride = 2;
  pointwise.kh = pointwise.kw = 1;
  pointwise.pad = 0;
  unpadded.pad = 0;
  stem.c_in = 3;
  wide.c_in = wide.c_out = 512;
  large.h = 7;  // winograd.h's
  odd_out.c_out = 24;
  for (const ConvGeometry& g : {strided, pointwise, unpadded, stem, wide, large, odd_out})
    EXPECT_FALSE(small_conv_weights_by_hand(g)) << g.input_shape().str() << " -> " << g.output_shape().str();
  std::vector<float> buf(1);  // refused before any element is read
  EXPECT_THROW(small_conv_backward_weights(large, buf.data(), buf.data(), buf.data()), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

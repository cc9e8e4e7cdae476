// The hand-written forward of the narrow convolutions (worker/backend/cpu/narrow_conv.h) against the double
// reference, on the geometries it takes, with widths that leave a partial pixel block, on 1 and 2 threads; and the
// CPU backend's three passes on them (its backward passes convert the hand-written forward's weight layout for
// oneDNN). CTest also runs this file under ONEDNN_MAX_CPU_ISA=AVX2, where the backend runs these layers' passes on
// winograd.h where it takes them and on oneDNN otherwise.
#include "worker/backend/cpu/narrow_conv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "tests/worker/conv_reference.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {
namespace {

using Case = test::ConvCase;
using test::conv_reference;
using test::expect_near;
using test::hwio;
using test::uniform_floats;

class NarrowConv : public ::testing::TestWithParam<Case> {};

bool avx512_machine() { return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core; }

TEST_P(NarrowConv, TheHandWrittenForwardMatchesTheReference) {
  const Case c = GetParam();
  const ConvGeometry g{.n = c.n, .h = c.h, .w = c.w, .c_in = c.c_in, .c_out = c.c_out, .kh = 3, .kw = 3, .pad = 1};
  if (!avx512_machine()) {
    EXPECT_FALSE(narrow_conv_by_hand(g)) << "oneDNN runs every convolution below avx512_core";
    GTEST_SKIP() << "the hand-written forward runs only where oneDNN runs avx512_core";
  }
  ASSERT_TRUE(narrow_conv_by_hand(g));
  std::mt19937 rng(11);
  const std::vector<float> x = uniform_floats(g.input_shape().numel(), rng),
                           w = uniform_floats(g.weight_shape().numel(), rng);
  std::vector<float> y(static_cast<size_t>(g.output_shape().numel()));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(c.threads);
  narrow_conv_forward(g, x.data(), hwio(g, w).data(), y.data());
  omp_set_num_threads(saved);
  expect_near(y, conv_reference(g, x, w, std::vector<float>(y.size())).y, "y");
}

TEST_P(NarrowConv, TheHandWrittenBackwardDataMatchesTheReference) {
  const Case c = GetParam();
  const ConvGeometry g{.n = c.n, .h = c.h, .w = c.w, .c_in = c.c_in, .c_out = c.c_out, .kh = 3, .kw = 3, .pad = 1};
  if (!narrow_conv_backward_data_by_hand(g)) {
    EXPECT_FALSE(avx512_machine() && c.c_in == 8 && c.c_out == 16) << "the 8 -> 16 layer's runs here on AVX-512";
    GTEST_SKIP() << "backward data is hand-written for the 8 -> 16 layer on AVX-512 only";
  }
  std::mt19937 rng(13);
  const std::vector<float> w = uniform_floats(g.weight_shape().numel(), rng),
                           dy = uniform_floats(g.output_shape().numel(), rng);
  std::vector<float> dx(static_cast<size_t>(g.input_shape().numel()), -1.0f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(c.threads);
  narrow_conv_backward_data(g, dy.data(), hwio(g, w).data(), dx.data());
  omp_set_num_threads(saved);
  expect_near(dx, conv_reference(g, std::vector<float>(dx.size()), w, dy).dx, "dx");
}

// Through the backend: weights imported and exported in its native layout, forward by hand where it runs, the
// backward passes on oneDNN.
TEST_P(NarrowConv, TheBackendsThreePassesMatchTheReference) {
  const Case c = GetParam();
  const ConvGeometry g{.n = c.n, .h = c.h, .w = c.w, .c_in = c.c_in, .c_out = c.c_out, .kh = 3, .kw = 3, .pad = 1};
  std::mt19937 rng(12);
  std::vector<float> x = uniform_floats(g.input_shape().numel(), rng),
                     w = uniform_floats(g.weight_shape().numel(), rng),
                     dy = uniform_floats(g.output_shape().numel(), rng);
  const test::ConvReference r = conv_reference(g, x, w, dy);
  auto backend = make_cpu_backend(c.threads);
  const auto native_elements = static_cast<int64_t>(backend->conv_weight_elements(g));
  Buffer wn = backend->allocate(native_elements * 4), dwn = backend->allocate(native_elements * 4);
  Tensor native_w(wn.data(), {native_elements}), native_dw(dwn.data(), {native_elements});
  backend->conv_weight_import(g, w.data(), native_w);
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), back(w.size());
  backend->conv_weight_export(g, native_w, back.data());
  EXPECT_EQ(back, w) << "import then export gives the weights back";
  backend->conv_forward(g, Tensor(x.data(), g.input_shape()), native_w, Tensor(y.data(), g.output_shape()));
  backend->conv_backward_data(g, Tensor(dy.data(), g.output_shape()), native_w, Tensor(dx.data(), g.input_shape()));
  backend->conv_backward_weights(g, Tensor(x.data(), g.input_shape()), Tensor(dy.data(), g.output_shape()), native_dw);
  backend->synchronize();
  backend->conv_weight_export(g, native_dw, dw.data());
  backend.reset();
  expect_near(y, r.y, "y");
  expect_near(dx, r.dx, "dx");
  expect_near(dw, r.dw, "dw");
}

INSTANTIATE_TEST_SUITE_P(Geometries, NarrowConv,
                         ::testing::Values(Case{2, 28, 28, 1, 8, 1}, Case{3, 28, 28, 8, 16, 1},
                                           Case{3, 28, 28, 8, 16, 2}, Case{2, 5, 17, 8, 16, 1}, Case{2, 1, 1, 8, 16, 1},
                                           Case{4, 9, 30, 1, 8, 2}, Case{3, 4, 33, 8, 16, 2}, Case{2, 3, 15, 8, 16, 1},
                                           Case{3, 14, 14, 16, 16, 1}, Case{2, 14, 14, 16, 32, 2},
                                           Case{2, 7, 9, 16, 32, 1}),
                         test::case_name);

TEST(NarrowConvChoice, TakesOnlyThreeByThreeStrideOneNarrowPairs) {
  const ConvGeometry first{.n = 128, .h = 28, .w = 28, .c_in = 8, .c_out = 16, .kh = 3, .kw = 3, .pad = 1};
  EXPECT_EQ(narrow_conv_by_hand(first), avx512_machine());
  ConvGeometry strided = first, pointwise = first, unpadded = first, other_pair = first;
  strided.stride = 2;
  pointwise.kh = pointwise.kw = 1;
  pointwise.pad = 0;
  unpadded.pad = 0;
  other_pair.c_in = other_pair.c_out = 32;
  for (const ConvGeometry& g : {strided, pointwise, unpadded, other_pair}) EXPECT_FALSE(narrow_conv_by_hand(g));
  std::vector<float> buf(1);  // refused before any element is read
  EXPECT_THROW(narrow_conv_forward(other_pair, buf.data(), buf.data(), buf.data()), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

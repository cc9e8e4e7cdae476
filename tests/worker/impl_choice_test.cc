// Which convolution algorithm the CPU backend takes (worker/backend/cpu/impl_choice.h): 3x3 stride-1 convolutions
// run as Winograd F(4x4, 3x3) where oneDNN has every pass of it (AVX-512), direct elsewhere. CTest also runs this
// file under ONEDNN_MAX_CPU_ISA=AVX2, where oneDNN has no Winograd.
#include "worker/backend/cpu/impl_choice.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {
namespace {

using dnnl::memory;

TEST(ConvAlgorithmChoice, OnlyThreeByThreeStrideOneConvolutionsAskForWinograd) {
  const ConvGeometry three{.n = 1, .h = 8, .w = 8, .c_in = 64, .c_out = 64, .kh = 3, .kw = 3, .stride = 1, .pad = 1};
  ConvGeometry strided = three, pointwise = three;
  strided.stride = 2;
  pointwise.kh = pointwise.kw = 1;
  pointwise.pad = 0;
  const auto wino = ConvAlgorithm::kWinogradWhereAvailable;
  EXPECT_EQ(conv_algorithm(wino, three), dnnl::algorithm::convolution_winograd);
  EXPECT_EQ(conv_algorithm(wino, strided), dnnl::algorithm::convolution_direct);
  EXPECT_EQ(conv_algorithm(wino, pointwise), dnnl::algorithm::convolution_direct);
  EXPECT_EQ(conv_algorithm(ConvAlgorithm::kDirect, three), dnnl::algorithm::convolution_direct);
}

// Whole 4x4 tiles: an output that leaves most of its tiles unused stays direct (3x3: 9/16, 6x6: 36/64), one that
// fills them takes Winograd (8x8, 4x4: all; 7x7 and 14x14: 49/64).
TEST(ConvAlgorithmChoice, SmallOutputsThatWasteWinogradTilesStayDirect) {
  const auto wino = ConvAlgorithm::kWinogradWhereAvailable;
  for (const auto& [side, expected] : std::vector<std::pair<int64_t, dnnl::algorithm>>{
           {3, dnnl::algorithm::convolution_direct},
           {6, dnnl::algorithm::convolution_direct},
           {5, dnnl::algorithm::convolution_direct},
           {4, dnnl::algorithm::convolution_winograd},
           {7, dnnl::algorithm::convolution_winograd},
           {8, dnnl::algorithm::convolution_winograd},
           {14, dnnl::algorithm::convolution_winograd}}) {
    const ConvGeometry g{.n = 8, .h = side, .w = side, .c_in = 64, .c_out = 64, .kh = 3, .kw = 3, .pad = 1};
    EXPECT_EQ(conv_algorithm(wino, g), expected) << side << "x" << side << ": tile use " << winograd_tile_use(g);
  }
}

// What choose_conv_forward gives for a geometry on this CPU, with the layouts the backend gives it (staging.h).
dnnl::algorithm chosen(const ConvGeometry& g) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const ConvLayouts layouts = conv_layouts(g);
  const memory::desc w({g.c_out, g.c_in, g.kh, g.kw}, memory::data_type::f32, memory::format_tag::any);
  return choose_conv_forward(conv_algorithm(ConvAlgorithm::kWinogradWhereAvailable, g), engine, layouts.src_in, w,
                             layouts.dst_in, {g.stride, g.stride}, {g.pad, g.pad})
      .algorithm;
}

// Winograd where oneDNN has every pass of it (2.x on avx512_core; 3.x has no f32 Winograd), direct otherwise; the
// numbers of both are checked against the double reference by tests/worker/staging_test.cc's WideConv (run natively
// and under AVX2).
TEST(ConvAlgorithmChoice, WinogradRunsWhereOneDnnHasItAndDirectElsewhere) {
  const bool avx512 = DNNL_VERSION_MAJOR < 3 && dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  const ConvGeometry resnet18{.n = 64, .h = 32, .w = 32, .c_in = 64, .c_out = 64, .kh = 3, .kw = 3, .pad = 1};
  const ConvGeometry stem{.n = 64, .h = 32, .w = 32, .c_in = 3, .c_out = 64, .kh = 3, .kw = 3, .pad = 1};
  for (const ConvGeometry& g : {resnet18, stem})
    EXPECT_EQ(chosen(g), avx512 ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct)
        << g.input_shape().str() << " on " << (avx512 ? "AVX-512" : "a narrower ISA or oneDNN 3.x");
  // A narrow layer on NHWC (8 channels), which oneDNN's Winograd does not take: direct, without an error.
  const ConvGeometry narrow{.n = 128, .h = 28, .w = 28, .c_in = 8, .c_out = 8, .kh = 3, .kw = 3, .pad = 1};
  EXPECT_EQ(chosen(narrow), dnnl::algorithm::convolution_direct);
}

}  // namespace
}  // namespace torus::worker::cpu

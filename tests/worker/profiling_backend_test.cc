// ProfilingBackend (worker/backend/profiling_backend.h): the per-op and per-layer profiles of torus-train-bench.
#include "worker/backend/profiling_backend.h"

#include <gtest/gtest.h>

#include <vector>

#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker {
namespace {

// Runs one forward convolution of each geometry through `profiled`.
void run_convs(Backend& inner, ProfilingBackend& profiled, const std::vector<ConvGeometry>& geometries) {
  for (const ConvGeometry& g : geometries) {
    const auto w_elements = static_cast<int64_t>(inner.conv_weight_elements(g));
    Buffer w = inner.allocate(w_elements * 4);
    std::vector<float> x(g.input_shape().numel(), 1.0f), y(g.output_shape().numel());
    std::vector<float> host_w(g.weight_shape().numel(), 0.5f);
    Tensor native_w(w.data(), {w_elements});
    profiled.conv_weight_import(g, host_w.data(), native_w);
    profiled.conv_forward(g, Tensor(x.data(), g.input_shape()), native_w, Tensor(y.data(), g.output_shape()));
    EXPECT_FLOAT_EQ(y[0], 0.5f * 4 * static_cast<float>(g.c_in)) << "a corner output sums 2x2 taps x c_in";
  }
}

const ConvGeometry kNarrow{.n = 2, .h = 8, .w = 8, .c_in = 8, .c_out = 16, .kh = 3, .kw = 3, .pad = 1};
const ConvGeometry kWide{.n = 2, .h = 4, .w = 4, .c_in = 16, .c_out = 32, .kh = 3, .kw = 3, .pad = 1};

TEST(ProfilingBackend, PerOpAddsEveryConvolutionUnderOneName) {
  auto cpu = cpu::make_cpu_backend(1);
  ProfilingBackend profiled(*cpu);
  run_convs(*cpu, profiled, {kNarrow, kWide, kNarrow});
  ASSERT_EQ(profiled.stats().size(), 1u);
  EXPECT_EQ(profiled.stats().at("conv_forward").calls, 3);
  EXPECT_NE(profiled.report().find("conv_forward"), std::string::npos);
}

TEST(ProfilingBackend, PerShapeSplitsConvolutionsByGeometry) {
  auto cpu = cpu::make_cpu_backend(1);
  ProfilingBackend profiled(*cpu, ProfileDetail::kPerShape);
  run_convs(*cpu, profiled, {kNarrow, kWide, kNarrow});
  ASSERT_EQ(profiled.stats().size(), 2u);
  EXPECT_EQ(profiled.stats().at("conv_forward 8>16 8x8 k3s1").calls, 2);
  EXPECT_EQ(profiled.stats().at("conv_forward 16>32 4x4 k3s1").calls, 1);
  profiled.reset();
  EXPECT_TRUE(profiled.stats().empty());
}

}  // namespace
}  // namespace torus::worker

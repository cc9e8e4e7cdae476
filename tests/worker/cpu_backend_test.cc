// The oneDNN backend's convolutions against a naive reference, on the geometries where oneDNN 2.6.3's
// jit_1x1:avx2 kernels write past their scratchpad (strided 1x1, fewer than 8 input channels). CTest runs this
// file under ONEDNN_MAX_CPU_ISA=AVX2 whatever the machine: before the workaround in cpu_backend.cc it aborted
// there ("munmap_chunk(): invalid pointer" / "malloc_consolidate(): unaligned fastbin chunk").
#include "worker/backend/cpu/cpu_backend.h"
#include "tests/worker/conv_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/util/error.h"

namespace torus::worker::cpu {
namespace {

struct Case {
  int64_t c_in, hw, stride;
};

using test::conv_reference;
using test::expect_near;

class StridedPointwiseConv : public ::testing::TestWithParam<Case> {};

TEST_P(StridedPointwiseConv, MatchesTheReferenceAndStaysInItsBuffers) {
  const Case c = GetParam();
  const ConvGeometry g{.n = 2, .h = c.hw, .w = c.hw, .c_in = c.c_in, .c_out = 16, .kh = 1, .kw = 1, .stride = c.stride};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return v;
  };
  const std::vector<float> x = random(g.input_shape().numel()), w = random(g.weight_shape().numel()),
                           dy = random(g.output_shape().numel());
  // A backend per case: its plans, scratchpads and weight buffers are freed (and glibc checks the heap) at its end.
  auto backend = make_cpu_backend(1);
  const auto native_elements = static_cast<int64_t>(backend->conv_weight_elements(g));
  Buffer wn = backend->allocate(native_elements * 4), dwn = backend->allocate(native_elements * 4);
  Tensor native_w(wn.data(), {native_elements}), native_dw(dwn.data(), {native_elements});
  backend->conv_weight_import(g, w.data(), native_w);
  std::vector<float> xs = x, dys = dy, y(g.output_shape().numel()), dx(g.input_shape().numel()), dw(w.size());
  Tensor tx(xs.data(), g.input_shape()), tdy(dys.data(), g.output_shape()), ty(y.data(), g.output_shape()),
      tdx(dx.data(), g.input_shape());
  backend->conv_forward(g, tx, native_w, ty);
  backend->conv_backward_data(g, tdy, native_w, tdx);
  backend->conv_backward_weights(g, tx, tdy, native_dw);
  backend->synchronize();
  backend->conv_weight_export(g, native_dw, dw.data());
  backend.reset();
  const test::ConvReference r = conv_reference(g, x, w, dy);
  expect_near(y, r.y, "y");
  expect_near(dx, r.dx, "dx");
  expect_near(dw, r.dw, "dw");
}

INSTANTIATE_TEST_SUITE_P(FewChannels, StridedPointwiseConv,
                         ::testing::Values(Case{3, 6, 2}, Case{3, 32, 2}, Case{3, 32, 3}, Case{3, 33, 2},
                                           Case{3, 33, 3}, Case{1, 7, 2}, Case{1, 7, 3}, Case{2, 8, 2},
                                           Case{5, 32, 2}, Case{6, 32, 2}, Case{7, 32, 2}, Case{8, 32, 2},
                                           Case{9, 33, 2}),
                         [](const auto& param_info) {
                           return "ic" + std::to_string(param_info.param.c_in) + "_" + std::to_string(param_info.param.hw) +
                                  "px_stride" + std::to_string(param_info.param.stride);
                         });

// training.precision: validation refuses bf16/fp16 on the CPU engine; a caller past it gets a refusal, not fp32.
TEST(CpuBackendPrecision, HalfActivationsAndLossScalingAreRefusedNotIgnored) {
  auto backend = make_cpu_backend(1);
  EXPECT_TRUE(backend->supports_activations(DType::kF32));
  EXPECT_FALSE(backend->supports_activations(DType::kBF16));
  EXPECT_FALSE(backend->supports_activations(DType::kF16));
  Buffer grads = backend->allocate(16);
  try {
    backend->enable_loss_scaling(LossScaleConfig{});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the CPU engine trains in fp32 only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(backend->unscale_gradients(grads.view({4})), InvalidArgument);
  EXPECT_THROW(backend->update_loss_scale(), InvalidArgument);
  EXPECT_THROW(backend->loss_scale_state(), InvalidArgument);
  EXPECT_THROW(backend->set_loss_scale_state(LossScaleState{}), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

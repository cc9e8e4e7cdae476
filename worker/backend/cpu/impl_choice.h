#pragma once
// Which of oneDNN's implementations the CPU backend takes: Winograd for the convolutions that have it, and,
// where oneDNN's first choice misbehaves (a convolution kernel that overruns its scratchpad, a batch norm that spins
// on a barrier), the first acceptable one of the implementations it offers (primitive_desc::next_impl).
#include <dnnl.hpp>
#include <string>
#include <string_view>

#include "common/util/error.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker::cpu {

// oneDNN 2.6.3's jit_1x1:avx2 convolution writes past its scratchpad (the reduce-to-unit-stride copy of the input)
// in backward data and backward weights when the stride is above 1 and the input channels are not a multiple of the
// 8-float AVX2 vector: valgrind shows writes 8-20 bytes past a block from dnnl_primitive_create, and glibc aborts
// later ("munmap_chunk(): invalid pointer"). Reproduced with oneDNN alone (ic 1-7, stride 2-3, 6x6 to 33x33);
// AVX-512 and SSE4.1 pick other kernels. Such a geometry takes oneDNN's next implementation (jit:avx2), which
// valgrind finds clean. tests/worker/cpu_backend_test.cc runs these geometries under ONEDNN_MAX_CPU_ISA=AVX2.
inline bool overruns_its_scratchpad(const ConvGeometry& g, std::string_view impl) {
  constexpr int64_t kAvx2Floats = 8;
  return g.kh == 1 && g.kw == 1 && g.stride > 1 && g.c_in % kAvx2Floats != 0 && impl.starts_with("jit_1x1:avx2");
}

// Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3, avx512_core only: on AVX2 the primitive cannot be created and the
// convolution stays direct) does a 3x3 stride-1 convolution with about a quarter of the multiplications. On an
// AVX-512 machine ResNet-18 (32x32x3, batch 64, 1 thread) trained at 53-57 img/s against direct's 30-33, with the
// same losses. TORUS_CPU_WINOGRAD=0 keeps every convolution direct.
//
// Winograd computes whole 4x4 output tiles: a 3x3 output fills 9 of one tile's 16 outputs and spends the rest. At a
// 3x3 output (the narrow ResNet-9's 64-channel residual block, batch 128, 1 thread) it was slower than direct in
// every pass (backward data 0.76 vs 0.52 ms, weights 0.88 vs 0.78); at 7x7 (77% of its tiles used) they were even.
// Below kMinWinogradTileUse the convolution stays direct.
inline constexpr double kMinWinogradTileUse = 0.7;
inline double winograd_tile_use(const ConvGeometry& g) {
  constexpr int64_t kTile = 4;
  const auto covered = [](int64_t extent) { return (extent + kTile - 1) / kTile * kTile; };
  return static_cast<double>(g.out_h() * g.out_w()) / static_cast<double>(covered(g.out_h()) * covered(g.out_w()));
}
inline dnnl::algorithm conv_algorithm(ConvAlgorithm preference, const ConvGeometry& g) {
  const bool winograd_shape =
      g.kh == 3 && g.kw == 3 && g.stride == 1 && winograd_tile_use(g) >= kMinWinogradTileUse;
  return preference == ConvAlgorithm::kWinogradWhereAvailable && winograd_shape ? dnnl::algorithm::convolution_winograd
                                                                                : dnnl::algorithm::convolution_direct;
}

struct ConvForward {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::algorithm algorithm;
};
// The forward training primitive of `preferred` when oneDNN has it and both its backward passes for this
// convolution, else the direct one. oneDNN answers "not implemented" only by throwing: the probe catches that.
inline ConvForward choose_conv_forward(dnnl::algorithm preferred, const dnnl::engine& engine,
                                       const dnnl::memory::desc& src, const dnnl::memory::desc& w,
                                       const dnnl::memory::desc& dst, const dnnl::memory::dims& strides,
                                       const dnnl::memory::dims& pad) {
  const auto forward = [&](dnnl::algorithm alg) {
#if DNNL_VERSION_MAJOR >= 3
    return dnnl::convolution_forward::primitive_desc(engine, dnnl::prop_kind::forward_training, alg, src, w, dst,
                                                     strides, pad, pad);
#else
    return dnnl::convolution_forward::primitive_desc(
        {dnnl::prop_kind::forward_training, alg, src, w, dst, strides, pad, pad}, engine);
#endif
  };
  if (preferred != dnnl::algorithm::convolution_direct) {
    try {
      dnnl::convolution_forward::primitive_desc fwd = forward(preferred);
#if DNNL_VERSION_MAJOR >= 3
      dnnl::convolution_backward_data::primitive_desc data(engine, preferred, src, w, dst, strides, pad, pad, fwd);
      dnnl::convolution_backward_weights::primitive_desc weights(engine, preferred, src, w, dst, strides, pad, pad,
                                                                 fwd);
#else
      dnnl::convolution_backward_data::primitive_desc data({preferred, src, w, dst, strides, pad, pad}, engine, fwd);
      dnnl::convolution_backward_weights::primitive_desc weights({preferred, src, w, dst, strides, pad, pad}, engine,
                                                                 fwd);
#endif
      return {fwd, preferred};
    } catch (const dnnl::error&) {  // no such implementation for this shape or ISA
    }
  }
  const auto direct = dnnl::algorithm::convolution_direct;
  return {forward(direct), direct};
}

// The first implementation that is not known to overrun, as a primitive descriptor of its own (under oneDNN 2.x the
// iterator behind next_impl() points into the op descriptor among `args`, which must outlive it: the copy returned
// does not). `args` are the primitive descriptor's constructor arguments (oneDNN 2.x: op descriptor, engine, hint;
// 3.x: engine, the descriptor's fields, hint).
template <class PrimitiveDesc, class... Args>
PrimitiveDesc safe_backward(const ConvGeometry& g, const Args&... args) {
  PrimitiveDesc pd(args...);
  while (overruns_its_scratchpad(g, pd.impl_info_str())) {
    if (!pd.next_impl())
      throw InvalidArgument("conv " + g.input_shape().str() + ": oneDNN offers only " + pd.impl_info_str() +
                            ", which overruns its buffers for this geometry");
  }
  return PrimitiveDesc(pd.get());
}

// oneDNN 2.6.3's first choice for BN training on nChw8c, bnorm_jit, syncs its threads with a spin barrier inside the
// kernel: with 2 threads on a loaded machine one spins while the other waits for a time slice (ResNet-18, 2 threads,
// load 4: BN forward 47 -> 345 ms/step, backward 45 -> 715 in another run, against NHWC's bnorm_tbb_jit).
// bnorm_tbb_jit runs the passes as separate parallel regions and is as fast alone (1 thread, (64, 32, 32, 64)
// forward: 3.9 vs 4.5 ms): take it when offered. `args` are the primitive descriptor's constructor arguments.
template <class PrimitiveDesc, class... Args>
PrimitiveDesc barrier_free(const Args&... args) {
  PrimitiveDesc pd(args...);
  do {
    if (std::string_view(pd.impl_info_str()).starts_with("bnorm_tbb_jit")) return PrimitiveDesc(pd.get());
  } while (pd.next_impl());
  return PrimitiveDesc(args...);
}

}  // namespace torus::worker::cpu

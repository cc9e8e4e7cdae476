#pragma once
// Which of oneDNN 2.6.3's implementations the CPU backend takes where its first choice misbehaves: a convolution
// kernel that overruns its scratchpad, a batch norm that spins on a barrier. Each walks the implementations oneDNN
// offers for an op (primitive_desc::next_impl) and keeps the first acceptable one.
#include <dnnl.hpp>
#include <string>
#include <string_view>

#include "common/util/error.h"
#include "worker/backend/backend.h"

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

// The first implementation of `desc` that is not known to overrun, as a primitive descriptor of its own (the
// iterator behind next_impl() points into `desc`, which must outlive it: the copy returned does not).
template <class PrimitiveDesc, class OpDesc>
PrimitiveDesc safe_backward(const OpDesc& desc, const dnnl::engine& engine,
                            const dnnl::convolution_forward::primitive_desc& hint, const ConvGeometry& g) {
  PrimitiveDesc pd(desc, engine, hint);
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

#pragma once
// What the .cu files of the CUDA backend share (device code only; included by kernels.cu and norm_kernels.cu):
// dtype-generic loads and stores, the grid-stride loop, the dtype dispatch and the launch check.
#include <cuda_runtime.h>

#include <string>

#include "common/util/error.h"
#include "worker/backend/cuda/errors.h"
#include "worker/backend/cuda/kernel_math.h"
#include "worker/tensor/tensor.h"

namespace torus::worker::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill the GPU; the kernels grid-stride over the rest.
inline unsigned blocks_for(int64_t n) { return kmath::grid_blocks(n, kThreads, int64_t{65535} * 8); }

// --- dtype-generic loads and stores (bf16 / fp16 are 16-bit patterns converted by kernel_math.h) -----------
template <DType D>
struct Storage;
template <>
struct Storage<DType::kF32> {
  using T = float;
  static __device__ float load(const T* p, int64_t i) { return p[i]; }
  static __device__ void store(T* p, int64_t i, float v) { p[i] = v; }
};
template <>
struct Storage<DType::kBF16> {
  using T = uint16_t;
  static __device__ float load(const T* p, int64_t i) { return kmath::float_from_bf16(p[i]); }
  static __device__ void store(T* p, int64_t i, float v) { p[i] = kmath::bf16_from_float(v); }
};
template <>
struct Storage<DType::kF16> {
  using T = uint16_t;
  static __device__ float load(const T* p, int64_t i) { return kmath::float_from_f16(p[i]); }
  static __device__ void store(T* p, int64_t i, float v) { p[i] = kmath::f16_from_float(v); }
};

#define TORUS_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += gridDim.x * static_cast<int64_t>(blockDim.x))

// Calls f.template operator()<D>() for the runtime dtype: the one place a dtype becomes a template argument.
template <typename F>
void dispatch(DType type, F&& f) {
  switch (type) {
    case DType::kF32:
      f.template operator()<DType::kF32>();
      return;
    case DType::kBF16:
      f.template operator()<DType::kBF16>();
      return;
    case DType::kF16:
      f.template operator()<DType::kF16>();
      return;
    default:
      throw InvalidArgument(std::string("cuda kernels: dtype ") + dtype_name(type) +
                            " is not a floating-point activation type (expected f32, bf16 or f16)");
  }
}

inline void check_launch() { CUDA_CHECK(cudaGetLastError()); }

}  // namespace
}  // namespace torus::worker::cuda

#pragma once
// What the .cu files of the CUDA backend share (device code only; included by kernels.cu and norm_kernels.cu):
// dtype-generic loads and stores, the grid-stride loop, the dtype dispatch and the launch check.
#include <cuda_runtime.h>

#include <cstdint>
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
// The same over [first, n).
#define TORUS_GRID_STRIDE_FROM(i, first, n)                                                        \
  for (int64_t i = (first) + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += gridDim.x * static_cast<int64_t>(blockDim.x))

// --- 16-byte packs (kernel_math.h: kPackBytes): kN elements of dtype D as floats, one load or store each ----------
template <DType D>
struct Pack {
  using S = Storage<D>;
  static constexpr int kN = static_cast<int>(kmath::kPackBytes / sizeof(typename S::T));
  float v[kN];

  // Pack `k` of the 16-byte aligned `base` (its elements k * kN ...).
  static __device__ Pack load(const void* base, int64_t k) {
    const uint4 raw = static_cast<const uint4*>(base)[k];
    const auto* e = reinterpret_cast<const typename S::T*>(&raw);
    Pack p;
#pragma unroll
    for (int j = 0; j < kN; ++j) p.v[j] = S::load(e, j);
    return p;
  }
  __device__ void store(void* base, int64_t k) const {
    uint4 raw;
    auto* e = reinterpret_cast<typename S::T*>(&raw);
#pragma unroll
    for (int j = 0; j < kN; ++j) S::store(e, j, v[j]);
    static_cast<uint4*>(base)[k] = raw;
  }
};

// Whether every pointer of an element-wise call allows the packed path.
template <typename... P>
bool packable(const P*... pointers) {
  return (kmath::pack_aligned(reinterpret_cast<uintptr_t>(pointers)) && ...);
}

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

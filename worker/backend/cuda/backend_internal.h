#pragma once
// What the CUDA backend's own source files share (cuda_backend.cc, device.cc, norm_pool.cc): argument checks,
// descriptor helpers, scratch slots and the batch norm and pooling plans. Not for code outside the backend.
#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <string>

#include "common/util/error.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/backend/cuda/handles.h"

namespace torus::worker::cuda {

// Scratch buffers the backend reuses between ops (all ordered on the compute stream).
enum ScratchSlot : int {
  kWeightGradHalf,
  kNormDy,
  kNormInvStd,
  kNormScratch,  // the NHWC batch norm kernels' partials and coefficients (bn_scratch_bytes)
  kLinearX,
  kLinearY,
  kLinearDx,
  kLinearDy
};

inline constexpr size_t kCublasWorkspace = size_t{32} << 20;  // fixed, so cuBLAS never allocates inside a graph capture
inline constexpr size_t kStashBytes = 16;                     // a pool workspace: unique per layer, holds nothing

inline cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDNN_DATA_FLOAT;
    case DType::kBF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kF16:
      return CUDNN_DATA_HALF;
    default:
      throw InvalidArgument(std::string("cuda backend: activations must be f32, bf16 or f16, got ") + dtype_name(t));
  }
}

// cuDNN 9 statuses are grouped by thousands: 3000 is NOT_SUPPORTED, 3xxx its specific reasons.
inline bool refused(cudnnStatus_t s) {
  return static_cast<int>(s) / 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED) / 1000;
}

inline void expect_elements(Tensor t, int64_t elements, const char* what) {
  if (t.numel() != elements)
    throw InvalidArgument(std::string("cuda backend: ") + what + " has " + std::to_string(t.numel()) +
                          " elements, expected " + std::to_string(elements));
}

inline void expect_dtype(Tensor t, DType type, const char* what) {
  if (t.dtype() != type)
    throw InvalidArgument(std::string("cuda backend: ") + what + " is " + dtype_name(t.dtype()) + ", expected " +
                          dtype_name(type));
}

inline void set_nhwc(const TensorDesc& d, DType t, int64_t n, int64_t h, int64_t w, int64_t c) {
  // cuDNN's legacy descriptors take int dimensions, and several of its kernels index with 32 bits.
  if (n * h * w * c > std::numeric_limits<int32_t>::max())
    throw InvalidArgument("cuda backend: tensor (" + std::to_string(n) + ", " + std::to_string(h) + ", " +
                          std::to_string(w) + ", " + std::to_string(c) +
                          ") has more than 2^31 - 1 elements, beyond cuDNN's limit: use a smaller per-GPU batch");
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NHWC, cudnn_type(t), static_cast<int>(n),
                                         static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}

// A Buffer's deleter has no context: the block goes back to whichever device's pool handed it out (device.cc).
void device_free(void* p) noexcept;

struct CudaBackend::NormPlan {
  TensorDesc x = make_tensor_desc();
  TensorDesc stats = make_tensor_desc();  // (1, C, 1, 1) fp32 for every activation dtype
  ActivationDesc relu = make_activation_desc();
  BnFusion fusion = BnFusion::kOff;
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  size_t fwd_bytes = 0, bwd_bytes = 0, reserve_bytes = 0;
};

struct CudaBackend::PoolPlan {
  TensorDesc x = make_tensor_desc(), y = make_tensor_desc();
  PoolDesc pool = make_pool_desc();
};

}  // namespace torus::worker::cuda

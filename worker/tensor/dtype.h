#pragma once
// The element type of tensors and of communication buffers: one enum for the backends, the kernels and the
// communicators. Header-only, so the comm layer and CUDA sources use it without linking the tensor library.
#include <cstddef>
#include <cstdint>

namespace torus::worker {

// fp32 activations and gradients; bf16/fp16 for the GPU backend's mixed precision and gradient compression; int32
// labels; f64/i64 for host-side collectives (metrics, counters).
enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kF64, kI64 };

inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
  }
  return 4;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kF64:
      return "f64";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

}  // namespace torus::worker

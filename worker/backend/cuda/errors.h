#pragma once
// CUDA_CHECK / CUDNN_CHECK / CUBLAS_CHECK / NCCL_CHECK: throw a typed CudaError carrying the expression,
// file:line and the library's own message (a CUDA runtime error of the machine's, a torus::HardwareFault:
// error_class.h). Only `main` catches (common/util/main_guard.h).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "worker/backend/cuda/cuda_error.h"
#include "worker/backend/cuda/device_count.h"

namespace torus::worker::cuda {

[[noreturn]] void throw_cuda_error(const char* library, const char* expr, const char* file, int line,
                                   const std::string& message);

// A failed CUDA runtime call throws DeviceFault, or torus::HardwareFault where the error is the machine's
// (error_class.h: an uncorrectable ECC error, a lost device; the rank exits retryable).
[[noreturn]] void throw_cuda_runtime_error(cudaError_t s, const char* expr, const char* file, int line);
inline void check(cudaError_t s, const char* expr, const char* file, int line) {
  if (s != cudaSuccess) throw_cuda_runtime_error(s, expr, file, line);
}
// cuDNN's status names are terse (CUDNN_STATUS_BAD_PARAM); its last-error string says which argument and why.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t s, const char* expr, const char* file, int line);
inline void check(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) throw_cudnn_error(s, expr, file, line);
}
inline void check(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cuda_error("cuBLAS", expr, file, line, cublasGetStatusString(s));
}
inline void check(ncclResult_t s, const char* expr, const char* file, int line) {
  if (s == ncclSuccess || s == ncclInProgress) return;
  std::string message = ncclGetErrorString(s);
  const char* last = ncclGetLastError(nullptr);  // which call failed and why (the argument is unused)
  if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  throw_cuda_error("NCCL", expr, file, line, message);
}

// Number of usable CUDA devices: 0 when there is no device or no driver; any other failure of cudaGetDeviceCount
// (e.g. a driver too old for this runtime) throws CudaError with CUDA's message (device_count.h says which).
int device_count();

}  // namespace torus::worker::cuda

#define CUDA_CHECK(expr) ::torus::worker::cuda::check((expr), #expr, __FILE__, __LINE__)
#define CUDNN_CHECK(expr) ::torus::worker::cuda::check((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_CHECK(expr) ::torus::worker::cuda::check((expr), #expr, __FILE__, __LINE__)
#define NCCL_CHECK(expr) ::torus::worker::cuda::check((expr), #expr, __FILE__, __LINE__)

#include "worker/backend/cuda/errors.h"

namespace torus::cuda {

void throw_cuda_error(const char* library, const char* expr, const char* file, int line, const std::string& message) {
  throw CudaError(std::string(library) + " error: " + expr + " failed at " + file + ":" + std::to_string(line) + ": " +
                  message);
}

void throw_cudnn_error(cudnnStatus_t s, const char* expr, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = cudnnGetErrorString(s);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  throw_cuda_error("cuDNN", expr, file, line, message);
}

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later calls see a clean state
    return 0;
  }
  return n;
}

}  // namespace torus::cuda

#include "worker/backend/cuda/errors.h"

namespace torus::cuda {

void throw_cuda_error(const char* library, const char* expr, const char* file, int line, const std::string& message) {
  throw CudaError(std::string(library) + " error: " + expr + " failed at " + file + ":" + std::to_string(line) + ": " +
                  message);
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

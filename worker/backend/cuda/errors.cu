#include "worker/backend/cuda/errors.h"

#include <string_view>

#include "worker/backend/cuda/error_class.h"

namespace torus::worker::cuda {

void throw_cuda_error(const char* library, const char* expr, const char* file, int line, const std::string& message) {
  std::string what =
      std::string(library) + " error: " + expr + " failed at " + file + ":" + std::to_string(line) + ": " + message;
  if (std::string_view(library) == "NCCL") throw CudaError(what);
  throw DeviceFault(what);
}

void throw_cuda_runtime_error(cudaError_t s, const char* expr, const char* file, int line) {
  throw_cuda_runtime_error(static_cast<int>(s), std::string("CUDA error: ") + expr + " failed at " + file + ":" +
                                                    std::to_string(line) + ": " + cudaGetErrorString(s) + " (" +
                                                    cudaGetErrorName(s) + ")");
}

void throw_cudnn_error(cudnnStatus_t s, const char* expr, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = cudnnGetErrorString(s);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  throw_cuda_error("cuDNN", expr, file, line, message);
}

static_assert(kCudaSuccess == cudaSuccess && kCudaErrorInsufficientDriver == cudaErrorInsufficientDriver &&
              kCudaErrorNoDevice == cudaErrorNoDevice);
// error_class.h's codes, as the CUDA headers define them.
static_assert(kCudaErrorMemoryAllocation == cudaErrorMemoryAllocation &&
              kCudaErrorDevicesUnavailable == cudaErrorDevicesUnavailable &&
              kCudaErrorEccUncorrectable == cudaErrorECCUncorrectable &&
              kCudaErrorNvlinkUncorrectable == cudaErrorNvlinkUncorrectable &&
              kCudaErrorContained == cudaErrorContained && kCudaErrorIllegalAddress == cudaErrorIllegalAddress &&
              kCudaErrorHardwareStackError == cudaErrorHardwareStackError &&
              kCudaErrorIllegalInstruction == cudaErrorIllegalInstruction &&
              kCudaErrorLaunchFailure == cudaErrorLaunchFailure &&
              kCudaErrorSystemNotReady == cudaErrorSystemNotReady &&
              kCudaErrorSystemDriverMismatch == cudaErrorSystemDriverMismatch &&
              kCudaErrorMpsConnectionFailed == cudaErrorMpsConnectionFailed &&
              kCudaErrorMpsClientTerminated == cudaErrorMpsClientTerminated && kCudaErrorUnknown == cudaErrorUnknown);
// The MPS errors error_class.h takes as one range: nothing else lies inside it.
static_assert(cudaErrorMpsRpcFailure == kCudaErrorMpsConnectionFailed + 1 &&
              cudaErrorMpsServerNotReady == kCudaErrorMpsConnectionFailed + 2 &&
              cudaErrorMpsMaxClientsReached == kCudaErrorMpsConnectionFailed + 3 &&
              cudaErrorMpsMaxConnectionsReached == kCudaErrorMpsConnectionFailed + 4 &&
              kCudaErrorMpsClientTerminated == kCudaErrorMpsConnectionFailed + 5);

int device_count() {
  DeviceCountQuery q;
  const cudaError_t status = cudaGetDeviceCount(&q.count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error so later calls see a clean state
    q.status = static_cast<int>(status);
    q.error = cudaGetErrorString(status);
    if (cudaDriverGetVersion(&q.driver_version) != cudaSuccess) q.driver_version = 0;
    if (cudaRuntimeGetVersion(&q.runtime_version) != cudaSuccess) q.runtime_version = 0;
  }
  return devices_from(q);
}

}  // namespace torus::worker::cuda

#include "worker/backend/cuda/error_class.h"

#include "common/util/error.h"
#include "worker/backend/cuda/cuda_error.h"

namespace torus::worker::cuda {

CudaFault cuda_fault(int cuda_error) {
  switch (cuda_error) {
    case kCudaErrorDevicesUnavailable:
    case kCudaErrorEccUncorrectable:
    case kCudaErrorNvlinkUncorrectable:
    case kCudaErrorContained:
    case kCudaErrorSystemNotReady:
    case kCudaErrorUnknown:
      return CudaFault::kMachine;
    default:
      // MPS: connection failed, RPC failed, server not ready, no room for a client or a connection, client dropped.
      if (cuda_error >= kCudaErrorMpsConnectionFailed && cuda_error <= kCudaErrorMpsClientTerminated)
        return CudaFault::kMachine;
      return CudaFault::kJob;
  }
}

launch::ExitCode cuda_exit_code(int cuda_error) {
  return cuda_fault(cuda_error) == CudaFault::kMachine ? launch::ExitCode::kRetryable : launch::ExitCode::kFailure;
}

void throw_cuda_runtime_error(int cuda_error, const std::string& what) {
  if (cuda_fault(cuda_error) == CudaFault::kMachine)
    throw HardwareFault(what + " (a fault of this machine's GPU or its CUDA services, not of the job: retryable)");
  throw DeviceFault(what);
}

}  // namespace torus::worker::cuda

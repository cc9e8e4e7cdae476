#include "worker/backend/cuda/device_count.h"

#include "worker/backend/cuda/cuda_error.h"

namespace torus::worker::cuda {
namespace {

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string version_name(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

int devices_from(const DeviceCountQuery& q) {
  if (q.status == kCudaSuccess) return q.count;
  if (q.status == kCudaErrorNoDevice) return 0;
  if (q.status == kCudaErrorInsufficientDriver && q.driver_version == 0) return 0;  // no driver installed
  std::string message = "CUDA error: cudaGetDeviceCount failed (error " + std::to_string(q.status) + "): " + q.error +
                        "; the driver supports CUDA " +
                        (q.driver_version == 0 ? std::string("(unknown)") : version_name(q.driver_version)) +
                        ", this build needs CUDA " + version_name(q.runtime_version);
  if (q.status == kCudaErrorInsufficientDriver) message += ": update the NVIDIA driver";
  throw CudaError(message);
}

}  // namespace torus::worker::cuda

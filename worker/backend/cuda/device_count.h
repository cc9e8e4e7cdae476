#pragma once
// What cudaGetDeviceCount's answer means, as a pure function (no CUDA include: tests/gpu_math runs it on the CPU).
// "No CUDA device" (a count of 0) is only cudaErrorNoDevice, or cudaErrorInsufficientDriver when no driver is
// installed at all (cudaDriverGetVersion reports 0: a machine without an NVIDIA driver). Every other error, an
// installed driver too old for this runtime included, is a CudaError with CUDA's own message: a broken GPU
// machine must not look like a CPU one.
#include <string>

namespace torus::worker::cuda {

// The cudaError_t values this mapping distinguishes (errors.cu checks them against the CUDA headers).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;

struct DeviceCountQuery {
  int status = kCudaSuccess;  // cudaGetDeviceCount's cudaError_t
  int count = 0;              // its count (meaningful on success)
  int driver_version = 0;     // cudaDriverGetVersion: 0 when no driver is installed
  int runtime_version = 0;    // cudaRuntimeGetVersion
  std::string error;          // cudaGetErrorString(status)
};

// The number of usable devices, or throws CudaError naming the error, the driver and the runtime versions.
int devices_from(const DeviceCountQuery& q);

}  // namespace torus::worker::cuda

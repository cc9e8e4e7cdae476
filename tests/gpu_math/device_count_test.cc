// worker/backend/cuda/device_count.h on the CPU: which cudaGetDeviceCount errors mean "no CUDA device" and which
// are reported, with the codes of the CUDA headers (errors.cu checks the constants against them).
#include "worker/backend/cuda/device_count.h"

#include <gtest/gtest.h>

#include <string>

#include "worker/backend/cuda/cuda_error.h"

namespace torus::worker::cuda {
namespace {

DeviceCountQuery failed_with(int status, const char* error, int driver_version) {
  DeviceCountQuery q;
  q.status = status;
  q.error = error;
  q.driver_version = driver_version;
  q.runtime_version = 13000;
  return q;
}

std::string message_of(const DeviceCountQuery& q) {
  try {
    (void)devices_from(q);
  } catch (const CudaError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a CudaError for status " << q.status;
  return "";
}

TEST(DeviceCount, SuccessIsTheCount) {
  DeviceCountQuery q;
  q.count = 8;
  EXPECT_EQ(devices_from(q), 8);
}

TEST(DeviceCount, NoDeviceIsZero) {
  EXPECT_EQ(devices_from(failed_with(kCudaErrorNoDevice, "no CUDA-capable device is detected", 12020)), 0);
}

TEST(DeviceCount, NoDriverInstalledIsZero) {
  // What the runtime answers on a machine without libcuda: insufficient driver, driver version 0.
  EXPECT_EQ(devices_from(failed_with(kCudaErrorInsufficientDriver,
                                     "CUDA driver version is insufficient for CUDA runtime version", 0)),
            0);
}

TEST(DeviceCount, AnOldDriverIsReportedWithBothVersions) {
  const std::string msg = message_of(failed_with(
      kCudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version", 12020));
  EXPECT_NE(msg.find("cudaGetDeviceCount"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA driver version is insufficient"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supports CUDA 12.2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs CUDA 13.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("update the NVIDIA driver"), std::string::npos) << msg;
}

TEST(DeviceCount, EveryOtherErrorIsReportedWithCudasMessage) {
  // cudaErrorInitializationError (3), cudaErrorSystemDriverMismatch (803), cudaErrorUnknown (999).
  for (const auto& [status, text] : {std::pair{3, "initialization error"},
                                     std::pair{803, "system has unsupported display driver / cuda driver combination"},
                                     std::pair{999, "unknown error"}}) {
    const std::string msg = message_of(failed_with(status, text, 13000));
    EXPECT_NE(msg.find(text), std::string::npos) << msg;
    EXPECT_NE(msg.find("error " + std::to_string(status)), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace torus::worker::cuda

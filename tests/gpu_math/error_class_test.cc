// worker/backend/cuda/error_class.h on the CPU: each CUDA runtime error's exit class (the machine's fault exits
// retryable, the job's permanent), with the codes of the CUDA headers (errors.cu checks the constants against them),
// and what a rank then exits with through run_main, the one place that catches.
#include "worker/backend/cuda/error_class.h"

#include <gtest/gtest.h>

#include <string>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/backend/cuda/cuda_error.h"

namespace torus::worker::cuda {
namespace {

using launch::ExitCode;

struct Case {
  int code;
  const char* name;
  ExitCode exit;
};

// Every error error_class.h names, the MPS range inside out, and neighbours of the machine's codes.
constexpr Case kCases[] = {
    {kCudaErrorEccUncorrectable, "cudaErrorECCUncorrectable", ExitCode::kRetryable},
    {kCudaErrorNvlinkUncorrectable, "cudaErrorNvlinkUncorrectable", ExitCode::kRetryable},
    {kCudaErrorContained, "cudaErrorContained", ExitCode::kRetryable},
    {kCudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable", ExitCode::kRetryable},
    {kCudaErrorSystemNotReady, "cudaErrorSystemNotReady", ExitCode::kRetryable},
    {kCudaErrorMpsConnectionFailed, "cudaErrorMpsConnectionFailed", ExitCode::kRetryable},
    {806, "cudaErrorMpsRpcFailure", ExitCode::kRetryable},
    {807, "cudaErrorMpsServerNotReady", ExitCode::kRetryable},
    {808, "cudaErrorMpsMaxClientsReached", ExitCode::kRetryable},
    {809, "cudaErrorMpsMaxConnectionsReached", ExitCode::kRetryable},
    {kCudaErrorMpsClientTerminated, "cudaErrorMpsClientTerminated", ExitCode::kRetryable},
    {kCudaErrorUnknown, "cudaErrorUnknown", ExitCode::kRetryable},
    {1, "cudaErrorInvalidValue", ExitCode::kFailure},
    {kCudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", ExitCode::kFailure},
    {kCudaErrorIllegalAddress, "cudaErrorIllegalAddress", ExitCode::kFailure},
    {701, "cudaErrorLaunchOutOfResources", ExitCode::kFailure},
    {kCudaErrorHardwareStackError, "cudaErrorHardwareStackError", ExitCode::kFailure},
    {kCudaErrorIllegalInstruction, "cudaErrorIllegalInstruction", ExitCode::kFailure},
    {716, "cudaErrorMisalignedAddress", ExitCode::kFailure},
    {kCudaErrorLaunchFailure, "cudaErrorLaunchFailure", ExitCode::kFailure},
    {kCudaErrorSystemDriverMismatch, "cudaErrorSystemDriverMismatch", ExitCode::kFailure},
    {804, "cudaErrorCompatNotSupportedOnDevice", ExitCode::kFailure},
    {811, "cudaErrorCdpNotSupported", ExitCode::kFailure},
    {213, "cudaErrorNotMappedAsPointer", ExitCode::kFailure},
    {215, "cudaErrorUnsupportedLimit", ExitCode::kFailure},
    {225, "cudaErrorUnsupportedDevSideSync", ExitCode::kFailure},
    {909, "cudaErrorTimeout", ExitCode::kFailure},
};

TEST(CudaErrorClass, EachErrorHasTheExitClassOfWhoseFaultItIs) {
  for (const Case& c : kCases) EXPECT_EQ(cuda_exit_code(c.code), c.exit) << c.name << " (" << c.code << ")";
}

// What a CUDA_CHECK throws reaches run_main as a type it maps: a machine's fault exits retryable (42) and says so,
// the job's exits permanent (1); CUDA's message is kept either way.
TEST(CudaErrorClass, ARankExitsWithItsErrorsClassThroughRunMain) {
  for (const Case& c : kCases) {
    const std::string what = std::string("CUDA error: cudaStreamSynchronize(stream) failed at x.cc:1: ") + c.name;
    ::testing::internal::CaptureStderr();
    const int code = run_main("torus-test", [&]() -> int { throw_cuda_runtime_error(c.code, what); });
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, launch::to_int(c.exit)) << c.name << ": " << said;
    EXPECT_NE(said.find(what), std::string::npos) << said;
    EXPECT_EQ(said.find("not of the job: retryable") != std::string::npos, c.exit == ExitCode::kRetryable) << said;
  }
}

// The job's faults stay DeviceFault (the comm watchdog's permanent class), the machine's are torus::HardwareFault.
TEST(CudaErrorClass, TheJobsFaultIsADeviceFaultTheMachinesAHardwareFault) {
  EXPECT_THROW(throw_cuda_runtime_error(kCudaErrorIllegalAddress, "illegal address"), DeviceFault);
  EXPECT_THROW(throw_cuda_runtime_error(kCudaErrorEccUncorrectable, "uncorrectable ECC error"), HardwareFault);
}

}  // namespace
}  // namespace torus::worker::cuda

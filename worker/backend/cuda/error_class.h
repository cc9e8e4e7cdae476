#pragma once
// Whose fault a failed CUDA runtime call is, as a pure function (no CUDA include: tests/gpu_math runs it on the CPU).
// The job's (its code or its inputs: a restarted gang runs into the same error, so the rank exits ExitCode::kFailure,
// permanent) or the machine's (the GPU's hardware or the node's CUDA services: the same job can run on healthy
// hardware, so the rank exits ExitCode::kRetryable and the gang restarts from its checkpoint, wherever the scheduler
// places it). The machine's, by what NVIDIA's runtime documents of each error (driver_types.h):
//   214 cudaErrorECCUncorrectable, 220 cudaErrorNvlinkUncorrectable: an uncorrectable error of the GPU's memory or of
//       an NVLink (the driver's Xid 48, 63, 74, 94/95);
//   226 cudaErrorContained: an exception the GPU's error containment caught, "certain classes of hardware errors";
//   46 cudaErrorDevicesUnavailable: the device is busy or unavailable (another process holds it in an exclusive
//       compute mode, or its memory);
//   802 cudaErrorSystemNotReady: the node's driver daemons (the fabric manager) are not running;
//   805-810 MPS: the node's MPS server failed, is recovering, dropped this client or has no room for it;
//   999 cudaErrorUnknown: an internal error the driver cannot name, as after it lost the device (Xid 79, "fallen off
//       the bus"). A fault of the job's own code shows as a named error; should an unknown one be the job's after all,
//       the gang's backoffLimit bounds its restarts.
// Every other error is the job's, notably 700 illegal address and 716 misaligned address; 715 illegal instruction and
// 714 hardware stack error, which NVIDIA attributes to the kernel (stack corruption, the stack limit exceeded); 719
// launch failure, whose documented causes are an invalid device pointer and out-of-bounds shared memory; 2 out of
// memory; 803/804, a driver install that does not match (a person must mend the node: a restart meets it again).
#include <string>

#include "common/launch/exit_codes.h"

namespace torus::worker::cuda {

// The cudaError_t values this mapping names (errors.cu checks them against the CUDA headers).
inline constexpr int kCudaErrorMemoryAllocation = 2;
inline constexpr int kCudaErrorDevicesUnavailable = 46;
inline constexpr int kCudaErrorEccUncorrectable = 214;
inline constexpr int kCudaErrorNvlinkUncorrectable = 220;
inline constexpr int kCudaErrorContained = 226;
inline constexpr int kCudaErrorIllegalAddress = 700;
inline constexpr int kCudaErrorHardwareStackError = 714;
inline constexpr int kCudaErrorIllegalInstruction = 715;
inline constexpr int kCudaErrorLaunchFailure = 719;
inline constexpr int kCudaErrorSystemNotReady = 802;
inline constexpr int kCudaErrorSystemDriverMismatch = 803;
inline constexpr int kCudaErrorMpsConnectionFailed = 805;
inline constexpr int kCudaErrorMpsClientTerminated = 810;
inline constexpr int kCudaErrorUnknown = 999;

enum class CudaFault { kJob, kMachine };

CudaFault cuda_fault(int cuda_error);

// The exit code of a rank whose CUDA runtime call failed with `cuda_error`: kFailure for the job's fault, kRetryable
// for the machine's.
launch::ExitCode cuda_exit_code(int cuda_error);

// Throws what a failed CUDA runtime call is: torus::HardwareFault for the machine's fault (run_main exits
// kRetryable), DeviceFault for the job's (permanent). `what` says which call failed, where, and CUDA's message.
[[noreturn]] void throw_cuda_runtime_error(int cuda_error, const std::string& what);

}  // namespace torus::worker::cuda

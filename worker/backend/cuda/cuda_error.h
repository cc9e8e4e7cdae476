#pragma once
// CudaError: a CUDA, cuDNN, cuBLAS or NCCL call failed. Its own header (no CUDA include) so that plain C++ code,
// such as device_count.h and the CPU tests of it, can throw and catch it.
#include "common/util/error.h"

namespace torus::worker::cuda {

class CudaError : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime, cuDNN or cuBLAS call failed on this rank's own device by the job's fault: a kernel fault (illegal
// address, misaligned access), out of memory. A restarted gang runs the same code into the same fault, so it is
// permanent (the comm watchdog exits with ExitCode::kFailure on it). A CUDA runtime error of the machine's (an
// uncorrectable ECC error, a lost device) is a torus::HardwareFault instead, retryable (error_class.h). NCCL's own
// errors (a peer gone, the network) stay plain CudaError: retryable.
class DeviceFault final : public CudaError {
 public:
  using CudaError::CudaError;
};

}  // namespace torus::worker::cuda

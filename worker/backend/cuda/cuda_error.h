#pragma once
// CudaError: a CUDA, cuDNN, cuBLAS or NCCL call failed. Its own header (no CUDA include) so that plain C++ code,
// such as device_count.h and the CPU tests of it, can throw and catch it.
#include "common/util/error.h"

namespace torus::worker::cuda {

class CudaError : public Error {
 public:
  using Error::Error;
};

}  // namespace torus::worker::cuda

#pragma once
// Test-only kernels that make a device misbehave on purpose (tests/gpu/gpu_failure_test.cc): a kernel that keeps a
// stream busy for a while and a kernel that faults. Plain C++ launchers, so the tests stay .cc files; each returns
// the launch's status (cudaGetLastError) for the caller's CUDA_CHECK.
#include <cuda_runtime.h>

#include <chrono>

namespace torus::test {

// One thread that busy-waits on `stream` for `duration` of device wall time, then returns: a producer that is still
// running when a collective ordered after it times out, and that ends on its own afterwards (no reset needed).
cudaError_t launch_spin(cudaStream_t stream, std::chrono::nanoseconds duration);

// One thread that stores to an address no allocation covers: the kernel faults with cudaErrorIllegalAddress, and
// the CUDA context of the process is unusable from then on (run it in a child process: a death test).
cudaError_t launch_illegal_write(cudaStream_t stream);

}  // namespace torus::test

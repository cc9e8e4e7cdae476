#include <cstdint>

#include "tests/gpu/fault_kernels.h"

namespace torus::test {
namespace {

// %globaltimer counts nanoseconds of wall time; clock64() counts SM cycles, whose rate follows the clocks the device
// happens to run at, so a cycle budget would only bound the spin loosely.
__device__ uint64_t wall_ns() {
  uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t duration_ns) {
  const uint64_t start = wall_ns();
  while (wall_ns() - start < duration_ns) {
  }
}

__global__ void store_kernel(int* target) { *static_cast<volatile int*>(target) = 1; }

}  // namespace

cudaError_t launch_spin(cudaStream_t stream, std::chrono::nanoseconds duration) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(duration.count()));
  return cudaGetLastError();
}

cudaError_t launch_illegal_write(cudaStream_t stream) {
  // The first page of the address space is never mapped. A kernel argument, so the device code holds no store
  // through a constant null pointer that the compiler could turn into a trap (another error than the one tested).
  int* const unmapped = reinterpret_cast<int*>(uintptr_t{16});
  store_kernel<<<1, 1, 0, stream>>>(unmapped);
  return cudaGetLastError();
}

}  // namespace torus::test

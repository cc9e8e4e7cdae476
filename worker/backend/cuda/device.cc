// Device selection, a rank's options from the environment, and the per-device caching pools (cuda_backend.h).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/util/tunables.h"
#include "worker/backend/cuda/backend_internal.h"

namespace torus::worker::cuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<BlockPool*> g_pools[kMaxDevices] = {};

}  // namespace

void device_free(void* p) noexcept {
  for (auto& pool : g_pools)
    if (BlockPool* b = pool.load(std::memory_order_acquire)) b->release(p);
}

// --- device selection ---------------------------------------------------------------------------------------
int select_device(int local_rank, int gpus_per_worker) {
  const int count = device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string seen = "this worker sees " + std::to_string(count) + " CUDA device(s) (CUDA_VISIBLE_DEVICES=" +
                           (visible != nullptr ? std::string("\"") + visible + "\"" : std::string("unset")) + ")";
  if (count == 0)
    throw InvalidArgument("spec.gang.device: the job asks for GPUs (" + std::to_string(gpus_per_worker) +
                          " per worker, one per rank) but " + seen);
  // Every rank of a worker fails the same way (a permanent error), rather than only those past the last device
  // while the others wait for them in the rendezvous.
  if (gpus_per_worker > count)
    throw InvalidArgument("spec.gang.device: the job asks for " + std::to_string(gpus_per_worker) +
                          " GPUs per worker (one per rank) but " + seen);
  if (local_rank < 0 || local_rank >= count)
    throw InvalidArgument("LOCAL_RANK: rank " + std::to_string(local_rank) + " needs GPU " +
                          std::to_string(local_rank) + " of " + std::to_string(gpus_per_worker) + " per worker, but " +
                          seen);
  CUDA_CHECK(cudaSetDevice(local_rank));
  return local_rank;
}

CudaOptions cuda_options_for_rank(int local_rank, int gpus_per_worker) {
  CudaOptions o;
  o.device = select_device(local_rank, gpus_per_worker);
  // Read now, not from the process snapshot: tests change these between calls.
  const tunables::Snapshot vars = tunables::Snapshot::from_environment();
  auto flag = [&vars](const char* name, int fallback) {
    const int64_t v = vars.integer(name).value_or(fallback);
    if (v != 0 && v != 1) throw InvalidArgument(std::string(name) + ": expected 0 or 1, got " + std::to_string(v));
    return v == 1;
  };
  o.tf32 = flag("TORUS_CUDA_TF32", 1) ? Tf32::kAllow : Tf32::kDeny;
  o.conv_search = flag("TORUS_CUDNN_BENCHMARK", 0) ? ConvSearch::kBenchmark : ConvSearch::kHeuristic;
  o.determinism = flag("TORUS_CUDNN_DETERMINISTIC", 0) ? Determinism::kRequired : Determinism::kAny;
  o.bn_fusion = flag("TORUS_CUDNN_BN_FUSION", 1) ? BnFusion::kCudnn : BnFusion::kOff;
  const int64_t mb = vars.integer("TORUS_CUDNN_WORKSPACE_MB").value_or(static_cast<int64_t>(o.workspace_limit >> 20));
  if (mb <= 0) throw InvalidArgument("TORUS_CUDNN_WORKSPACE_MB: must be a positive integer, got " + std::to_string(mb));
  o.workspace_limit = static_cast<size_t>(mb) << 20;
  return o;
}

std::string device_description(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB",
                static_cast<double>(p.totalGlobalMem) / static_cast<double>(size_t{1} << 30));
  return std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + memory;
}

BlockPool& device_pool(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw InvalidArgument("cuda backend: device " + std::to_string(device) + " outside [0, " +
                          std::to_string(kMaxDevices) + ")");
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (BlockPool* existing = g_pools[device].load(std::memory_order_acquire)) return *existing;
  // Never destroyed: Buffers may outlive every other static at exit, and the driver reclaims the memory.
  auto* pool = new BlockPool({[device](size_t bytes) -> void* {
                                // The calling thread's current device may be another one: allocate on `device`.
                                int current = 0;
                                CUDA_CHECK(cudaGetDevice(&current));
                                if (current != device) CUDA_CHECK(cudaSetDevice(device));
                                void* p = nullptr;
                                const cudaError_t e = cudaMalloc(&p, bytes);
                                if (current != device) CUDA_CHECK(cudaSetDevice(current));
                                if (e == cudaErrorMemoryAllocation) {
                                  (void)cudaGetLastError();  // out of memory is not sticky
                                  return nullptr;            // the pool trims its cache and retries
                                }
                                // Anything else (e.g. cudaMalloc inside a graph capture) is an error.
                                CUDA_CHECK(e);
                                return p;
                              },
                              [](void* p) { (void)cudaFree(p); }});
  g_pools[device].store(pool, std::memory_order_release);
  return *pool;
}

}  // namespace torus::worker::cuda

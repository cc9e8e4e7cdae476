#pragma once
// A caching allocator for one stream's device memory (activations, workspaces, scratch): freed blocks go back
// to a size-keyed cache instead of to cudaFree (which synchronizes the device), and a later request of a close
// size reuses them. Work is ordered on one compute stream, so a block freed by the host while kernels that use it
// are still queued is only handed to work queued after them: reuse is safe without events.
//
// No CUDA here: the upstream allocator is a pair of functions, so tests/gpu_math exercises the pool with malloc.
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

namespace torus::worker::cuda {

struct BlockPoolStats {
  size_t in_use_bytes = 0;  // handed out and not yet released
  size_t cached_bytes = 0;  // held for reuse
  size_t peak_bytes = 0;    // max of in_use + cached
  size_t upstream_allocs = 0;
  size_t reuses = 0;
};

class BlockPool {
 public:
  struct Upstream {
    std::function<void*(size_t)> alloc;  // nullptr when out of memory (the pool trims and retries); throws otherwise
    std::function<void(void*)> free;     // must not throw
  };
  static constexpr size_t kSmallRound = 512;              // cudaMalloc's own granularity
  static constexpr size_t kLargeRound = size_t{2} << 20;  // large blocks in 2 MiB steps
  static constexpr size_t kLargeFrom = size_t{1} << 20;

  explicit BlockPool(Upstream upstream) : upstream_(std::move(upstream)) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool();  // returns cached blocks; blocks still in use are the owners' (leaked rather than double-freed)

  // A block of at least `bytes`; throws SystemError naming the request and the pool's state when upstream fails
  // even after the cache was emptied.
  void* allocate(size_t bytes);
  // Back to the cache; unknown pointers are ignored (never throws: called from deleters).
  void release(void* p) noexcept;
  // Returns every cached block upstream (on out-of-memory, or to hand memory to another library).
  void trim() noexcept;
  BlockPoolStats stats() const;
  static size_t rounded(size_t bytes);

 private:
  void* take_cached(size_t size);
  void trim_locked() noexcept;

  Upstream upstream_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cache_;        // size -> free block
  std::unordered_map<void*, size_t> in_use_;  // block -> size
  BlockPoolStats stats_;
};

}  // namespace torus::worker::cuda

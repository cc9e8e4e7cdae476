#include "worker/backend/cuda/block_pool.h"

#include <algorithm>
#include <string>

#include "common/util/error.h"

namespace torus::worker::cuda {

BlockPool::~BlockPool() { trim(); }

size_t BlockPool::rounded(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  const size_t step = bytes >= kLargeFrom ? kLargeRound : kSmallRound;
  return (bytes + step - 1) / step * step;
}

void* BlockPool::take_cached(size_t size) {
  auto it = cache_.lower_bound(size);
  // A cached block serves a request up to a quarter smaller than itself; beyond that it would waste memory.
  if (it == cache_.end() || it->first > size + size / 4) return nullptr;
  void* p = it->second;
  in_use_.emplace(p, it->first);
  stats_.cached_bytes -= it->first;
  stats_.in_use_bytes += it->first;
  stats_.reuses += 1;
  cache_.erase(it);
  return p;
}

void* BlockPool::allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  std::lock_guard lock(mu_);
  if (void* p = take_cached(size)) return p;
  void* p = upstream_.alloc(size);
  if (p == nullptr) {  // out of memory: give the cache back and try once more
    trim_locked();
    p = upstream_.alloc(size);
  }
  if (p == nullptr)
    throw SystemError("device memory: cannot allocate " + std::to_string(size) + " bytes (" +
                      std::to_string(stats_.in_use_bytes) + " bytes in use by this process)");
  in_use_.emplace(p, size);
  stats_.in_use_bytes += size;
  stats_.upstream_allocs += 1;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.in_use_bytes + stats_.cached_bytes);
  return p;
}

void BlockPool::release(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard lock(mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end()) return;
  cache_.emplace(it->second, p);
  stats_.in_use_bytes -= it->second;
  stats_.cached_bytes += it->second;
  in_use_.erase(it);
}

void BlockPool::trim() noexcept {
  std::lock_guard lock(mu_);
  trim_locked();
}

void BlockPool::trim_locked() noexcept {
  for (auto& [size, p] : cache_) upstream_.free(p);
  cache_.clear();
  stats_.cached_bytes = 0;
}

BlockPoolStats BlockPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace torus::worker::cuda

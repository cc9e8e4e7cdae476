#pragma once
// Buffers a captured CUDA Graph still uses. A graph bakes device addresses in, so a workspace or scratch buffer that
// grows after a capture must not go back to the pool (and on to another allocation, or cudaFree) while the graph
// may still replay. The backend pins the addresses of its growable buffers when a capture ends; replace() keeps a
// pinned buffer alive (until the backend is destroyed, which its graphs must not outlive) instead of freeing it.
// Plain C++: tests/gpu_math runs it with host memory.
#include <cstddef>
#include <unordered_set>
#include <utility>
#include <vector>

#include "worker/tensor/tensor.h"

namespace torus::worker::cuda {

class GraphPins {
 public:
  // A graph was captured that may use the buffer at `p` (nullptr: nothing).
  void pin(const void* p) {
    if (p != nullptr) pinned_.insert(p);
  }
  // Puts `fresh` into `slot`; the old buffer is kept when a graph uses it, freed otherwise.
  void replace(Buffer& slot, Buffer fresh) {
    if (pinned_.erase(slot.data()) > 0) retained_.push_back(std::move(slot));
    slot = std::move(fresh);
  }
  size_t retained_bytes() const {
    size_t bytes = 0;
    for (const Buffer& b : retained_) bytes += b.bytes();
    return bytes;
  }

 private:
  std::unordered_set<const void*> pinned_;
  std::vector<Buffer> retained_;
};

}  // namespace torus::worker::cuda

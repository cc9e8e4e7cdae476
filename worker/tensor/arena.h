#pragma once
// One contiguous allocation holding many named tensors at fixed offsets, registered in a fixed order.
// The model keeps three: parameters, gradients (a mirror of the parameters, so a gradient bucket is a
// contiguous span of parameter indices) and BN running statistics (averaged across ranks in one call).
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "worker/tensor/tensor.h"

namespace torus::worker {

// What a parameter is; weight decay applies to conv and linear weights only.
enum class ParamKind : uint8_t { kConvWeight, kLinearWeight, kBias, kNormScale, kNormShift, kNormStat };

bool takes_weight_decay(ParamKind kind);
const char* param_kind_name(ParamKind kind);

struct ArenaEntry {
  std::string name;
  ParamKind kind;
  Shape logical_shape;  // e.g. (O, I, KH, KW) for a conv weight, whatever layout the backend stores it in
  size_t offset;        // in elements from the arena start; a multiple of kAlignElements
  size_t elements;      // stored elements: the backend's native layout may pad (e.g. channel blocks of 16)
};

class Arena {
 public:
  static constexpr size_t kAlignElements = 16;  // 64 bytes of fp32
  using Allocator = std::function<Buffer(size_t bytes)>;

  // Registers a tensor; returns its index. Only before allocate().
  size_t add(std::string name, ParamKind kind, Shape logical_shape, size_t stored_elements);
  // Allocates (zero-filled) memory for every entry.
  void allocate(const Allocator& alloc);
  // An arena with the same entries and fresh memory (gradients, optimizer momentum).
  Arena mirror(const Allocator& alloc) const;

  size_t size() const { return entries_.size(); }
  const ArenaEntry& entry(size_t i) const { return entries_.at(i); }
  const std::vector<ArenaEntry>& entries() const { return entries_; }
  // Entry i as a flat fp32 tensor of its stored elements.
  Tensor view(size_t i) const;
  // Entries [first, last) as one flat tensor: the unit a gradient bucket reduces.
  Tensor span_view(size_t first, size_t last) const;
  // Everything, including alignment gaps (which stay zero).
  Tensor all() const;
  size_t total_elements() const { return total_; }
  bool allocated() const { return buffer_.data() != nullptr; }

 private:
  std::vector<ArenaEntry> entries_;
  size_t total_ = 0;
  Buffer buffer_;
};

}  // namespace torus::worker

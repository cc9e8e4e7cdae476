#include "worker/tensor/arena.h"

#include <algorithm>

#include "common/util/error.h"

namespace torus::worker {

bool takes_weight_decay(ParamKind kind) { return kind == ParamKind::kConvWeight || kind == ParamKind::kLinearWeight; }

const char* param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::kConvWeight:
      return "conv_weight";
    case ParamKind::kLinearWeight:
      return "linear_weight";
    case ParamKind::kBias:
      return "bias";
    case ParamKind::kNormScale:
      return "norm_scale";
    case ParamKind::kNormShift:
      return "norm_shift";
    case ParamKind::kNormStat:
      return "norm_stat";
  }
  return "?";
}

size_t Arena::add(std::string name, ParamKind kind, Shape logical_shape, size_t stored_elements) {
  if (allocated()) throw InvalidArgument("arena: cannot add '" + name + "' after allocation");
  if (stored_elements < static_cast<size_t>(logical_shape.numel()))
    throw InvalidArgument("arena: '" + name + "' stores fewer elements than its shape " + logical_shape.str());
  entries_.push_back({std::move(name), kind, logical_shape, total_, stored_elements});
  total_ += (stored_elements + kAlignElements - 1) / kAlignElements * kAlignElements;
  return entries_.size() - 1;
}

void Arena::allocate(const Allocator& alloc) { buffer_ = alloc(std::max<size_t>(total_, 1) * sizeof(float)); }

Arena Arena::mirror(const Allocator& alloc) const {
  Arena copy;
  copy.entries_ = entries_;
  copy.total_ = total_;
  copy.allocate(alloc);
  return copy;
}

Tensor Arena::view(size_t i) const {
  const ArenaEntry& e = entries_.at(i);
  return Tensor(static_cast<float*>(buffer_.data()) + e.offset, Shape{static_cast<int64_t>(e.elements)});
}

Tensor Arena::span_view(size_t first, size_t last) const {
  if (first >= last || last > entries_.size())
    throw InvalidArgument("arena span [" + std::to_string(first) + ", " + std::to_string(last) + ") out of range");
  size_t begin = entries_[first].offset;
  size_t end = entries_[last - 1].offset + entries_[last - 1].elements;
  return Tensor(static_cast<float*>(buffer_.data()) + begin, Shape{static_cast<int64_t>(end - begin)});
}

Tensor Arena::all() const { return Tensor(buffer_.data(), Shape{static_cast<int64_t>(total_)}); }

}  // namespace torus::worker

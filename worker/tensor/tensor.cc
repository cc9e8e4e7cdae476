#include "worker/tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "common/util/error.h"

namespace torus::worker {

Shape::Shape(std::initializer_list<int64_t> dims) {
  if (dims.size() > kMaxRank) throw InvalidArgument("Shape: at most 4 dimensions, got " + std::to_string(dims.size()));
  for (int64_t d : dims) {
    if (d < 0) throw InvalidArgument("Shape: dimensions must be >= 0, got " + std::to_string(d));
    dims_[static_cast<size_t>(rank_++)] = d;
  }
}

int64_t Shape::numel() const {
  if (rank_ == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < rank_; ++i) os << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  os << ")";
  return os.str();
}

float* Tensor::f32() const {
  if (dtype_ != DType::kF32) throw InvalidArgument(std::string("tensor: expected f32, got ") + dtype_name(dtype_));
  return static_cast<float*>(data_);
}

int32_t* Tensor::i32() const {
  if (dtype_ != DType::kI32) throw InvalidArgument(std::string("tensor: expected i32, got ") + dtype_name(dtype_));
  return static_cast<int32_t*>(data_);
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape.numel() != numel())
    throw InvalidArgument("tensor reshape: " + shape_.str() + " has " + std::to_string(numel()) + " elements, " +
                          shape.str() + " has " + std::to_string(shape.numel()));
  return Tensor(data_, shape, dtype_);
}

Tensor Buffer::view(Shape shape, DType dtype) const {
  size_t need = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  if (need > bytes_)
    throw InvalidArgument("buffer view: " + shape.str() + " needs " + std::to_string(need) + " bytes, buffer has " +
                          std::to_string(bytes_));
  return Tensor(data_, shape, dtype);
}

namespace {
void free_host(void* p) noexcept { std::free(p); }
}  // namespace

Buffer allocate_host(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return Buffer(p, bytes, &free_host);
}

}  // namespace torus::worker

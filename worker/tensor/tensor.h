#pragma once
// Tensors are non-owning views (pointer, shape, dtype) over memory a Buffer or an arena owns.
// Activations are NHWC: a 4-D tensor is (N, H, W, C); a 2-D one is (N, C).
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "worker/tensor/dtype.h"

namespace torus::worker {

// Up to 4 dimensions, compared by value.
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  std::string str() const;
  bool operator==(const Shape& other) const = default;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, Shape shape, DType dtype = DType::kF32) : data_(data), shape_(shape), dtype_(dtype) {}

  void* data() const { return data_; }
  // The data as fp32; throws InvalidArgument when the dtype is not fp32.
  float* f32() const;
  // The data as int32 (labels); throws InvalidArgument when the dtype is not int32.
  int32_t* i32() const;
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }
  std::span<float> span() const { return {f32(), static_cast<size_t>(numel())}; }
  // The same memory seen with another shape of the same element count (e.g. (N, 1, 1, C) -> (N, C)).
  Tensor reshaped(Shape shape) const;

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

// Owning memory from a backend (host or device). Move-only; frees with the deleter it was given.
class Buffer {
 public:
  using Deleter = void (*)(void*) noexcept;
  Buffer() = default;
  Buffer(void* data, size_t bytes, Deleter deleter) : data_(data), bytes_(bytes), deleter_(deleter) {}
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ != nullptr && deleter_ != nullptr) deleter_(data_);
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Tensor view(Shape shape, DType dtype = DType::kF32) const;

 private:
  void swap(Buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(deleter_, other.deleter_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Deleter deleter_ = nullptr;
};

// Host memory aligned to 64 bytes (one cache line, one AVX-512 vector), zero-filled.
Buffer allocate_host(size_t bytes);

}  // namespace torus::worker

#pragma once
// Buffers and reduction kernels shared by every communicator (element types: worker/tensor/dtype.h). No CUDA here.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "worker/tensor/dtype.h"

namespace torus::comm {

using worker::DType;
enum class ReduceOp { kSum, kMax };

// A typed view of caller-owned memory: the communicator never allocates or frees it.
struct BufferView {
  void* data = nullptr;
  size_t count = 0;  // elements, not bytes
  DType dtype = DType::kF32;

  size_t bytes() const { return count * dtype_size(dtype); }
  std::byte* at(size_t element) const { return static_cast<std::byte*>(data) + element * dtype_size(dtype); }
  BufferView slice(size_t begin, size_t end) const { return BufferView{at(begin), end - begin, dtype}; }
};

inline BufferView view_of(std::span<float> s) { return {s.data(), s.size(), DType::kF32}; }
inline BufferView view_of(std::span<double> s) { return {s.data(), s.size(), DType::kF64}; }
inline BufferView view_of(std::span<int32_t> s) { return {s.data(), s.size(), DType::kI32}; }
inline BufferView view_of(std::span<int64_t> s) { return {s.data(), s.size(), DType::kI64}; }

// The part of `count` elements that `rank` of `size` owns in reduce-scatter / all-gather: contiguous, the first
// `count % size` ranks get one extra element, so every count (0, primes) splits without padding.
struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};
Range chunk_range(size_t count, int size, int rank);

// out[i] = op(a[i], b[i]) for `count` elements; out may alias a or b. 16-bit types accumulate in fp32.
void reduce_into(DType t, ReduceOp op, void* out, const void* a, const void* b, size_t count);

// out = op(in[0], ..., in[n-1]) element-wise, each input read once: the memory-bound inner loop of the shared-memory
// level. out may alias in[0] or in[1], not the others.
void reduce_many(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t count);

// In-place scaling (averaging gradients); integers are divided, floats multiplied.
void scale(BufferView b, double factor);

// fp32 <-> fp16 / bf16 (gradient compression), rounded by worker/backend/half.h: to nearest even.
void compress(DType to, std::span<const float> in, uint16_t* out);
void decompress(DType from, const uint16_t* in, std::span<float> out);

}  // namespace torus::comm

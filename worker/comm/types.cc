#include "worker/comm/types.h"

#include <algorithm>
#include <cstring>

#include "common/util/error.h"
#include "worker/backend/half.h"

namespace torus::comm {

namespace math = worker::math;

Range chunk_range(size_t count, int size, int rank) {
  const size_t n = static_cast<size_t>(size);
  const size_t r = static_cast<size_t>(rank);
  const size_t base = count / n;
  const size_t extra = count % n;
  const size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

namespace {

template <typename T>
struct Plain {
  static T load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void store(void* p, size_t i, T v) { static_cast<T*>(p)[i] = v; }
  using Acc = T;
};
struct Half {
  static float load(const void* p, size_t i) { return math::float_from_f16(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = math::f16_from_float(v); }
  using Acc = float;
};
struct BFloat {
  static float load(const void* p, size_t i) { return math::float_from_bf16(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = math::bf16_from_float(v); }
  using Acc = float;
};

template <typename E>
void reduce_typed(ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const auto x = E::load(a, i);
    const auto y = E::load(b, i);
    E::store(out, i, op == ReduceOp::kSum ? x + y : std::max(x, y));
  }
}

// Two-input sums are the common case: a plain loop the compiler vectorises (aliasing with out is allowed when equal).
template <typename T>
void sum_two(void* out, const void* a, const void* b, size_t count) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = x[i] + y[i];
}

template <typename T>
void add_into(T* out, const T* src, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] += src[i];
}

// Sums n inputs block by block: the first two in one pass, the rest added while the block is still in cache, so each
// input is streamed from memory once.
template <typename T>
void sum_many(void* out, const void* const* in, int n, size_t count) {
  constexpr size_t kBlock = 8192;
  T* o = static_cast<T*>(out);
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t len = std::min(kBlock, count - start);
    const T* first = static_cast<const T*>(in[0]) + start;
    if (n == 1) {
      if (o + start != first) std::memcpy(o + start, first, len * sizeof(T));
      continue;
    }
    sum_two<T>(o + start, first, static_cast<const T*>(in[1]) + start, len);
    for (int j = 2; j < n; ++j) add_into(o + start, static_cast<const T*>(in[j]) + start, len);
  }
}

template <typename Fn>
void dispatch(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32:
      return fn(Plain<float>{});
    case DType::kF64:
      return fn(Plain<double>{});
    case DType::kI32:
      return fn(Plain<int32_t>{});
    case DType::kI64:
      return fn(Plain<int64_t>{});
    case DType::kF16:
      return fn(Half{});
    case DType::kBF16:
      return fn(BFloat{});
  }
}

template <typename E>
constexpr bool is_plain = !std::is_same_v<E, Half> && !std::is_same_v<E, BFloat>;

}  // namespace

void reduce_into(DType t, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  dispatch(t, [&](auto e) {
    using E = decltype(e);
    if constexpr (is_plain<E>) {
      if (op == ReduceOp::kSum) return sum_two<typename E::Acc>(out, a, b, count);
    }
    reduce_typed<E>(op, out, a, b, count);
  });
}

void reduce_many(DType t, ReduceOp op, void* out, const void* const* in, int n, size_t count) {
  if (n <= 0 || count == 0) return;
  dispatch(t, [&](auto e) {
    using E = decltype(e);
    if constexpr (is_plain<E>) {
      if (op == ReduceOp::kSum) return sum_many<typename E::Acc>(out, in, n, count);
    }
    if (out != in[0]) std::memcpy(out, in[0], count * dtype_size(t));
    for (int j = 1; j < n; ++j) reduce_typed<E>(op, out, out, in[j], count);
  });
}

void scale(BufferView b, double factor) {
  dispatch(b.dtype, [&](auto e) {
    using E = decltype(e);
    using Acc = typename E::Acc;
    if constexpr (std::is_integral_v<Acc>) {
      const Acc div = static_cast<Acc>(1.0 / factor + 0.5);
      for (size_t i = 0; i < b.count; ++i) E::store(b.data, i, E::load(b.data, i) / div);
    } else {
      const Acc f = static_cast<Acc>(factor);
      for (size_t i = 0; i < b.count; ++i) E::store(b.data, i, E::load(b.data, i) * f);
    }
  });
}

void compress(DType to, std::span<const float> in, uint16_t* out) {
  if (to == DType::kF16) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = math::f16_from_float(in[i]);
  } else if (to == DType::kBF16) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = math::bf16_from_float(in[i]);
  } else {
    throw InvalidArgument("compress: target type must be float16 or bfloat16, got " + std::string(dtype_name(to)));
  }
}

void decompress(DType from, const uint16_t* in, std::span<float> out) {
  if (from == DType::kF16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = math::float_from_f16(in[i]);
  } else if (from == DType::kBF16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = math::float_from_bf16(in[i]);
  } else {
    throw InvalidArgument("decompress: source type must be float16 or bfloat16, got " + std::string(dtype_name(from)));
  }
}

}  // namespace torus::comm

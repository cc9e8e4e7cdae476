#pragma once
// GCC vector extensions for the CPU backend's hand-written loops (batch_norm.cc, narrow_conv.cc): V floats in one
// vector, compiled for the ISA of the always-inlined wrapper that calls them (target attributes), so one loop body
// serves SSE, AVX2 and AVX-512.
#include <cstdint>
#include <cstring>

// These functions take and return vectors but are always inlined into the wrapper of their ISA, so no vector
// crosses a call and GCC's note that such a call's ABI depends on the ISA is moot.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu::vec {

// A typedef in a class template: GCC drops vector_size on a dependent alias template.
template <int V>
struct VecOf {
  typedef float type __attribute__((vector_size(V * sizeof(float))));
};
template <int V>
using Vec = typename VecOf<V>::type;
// The mask a comparison of two Vec<V> gives (all ones where true), and the bits of a Vec<V> to combine with it.
template <int V>
struct BitsOf {
  typedef int32_t type __attribute__((vector_size(V * sizeof(float))));
};

template <int V>
[[gnu::always_inline]] inline Vec<V> load(const float* p) {
  Vec<V> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int V>
[[gnu::always_inline]] inline void store(float* p, Vec<V> v) {
  std::memcpy(p, &v, sizeof(v));
}

// The widest vector (at most `lanes` floats) that tiles a row of c channels; 1 where c is only known at run time (0).
constexpr int lanes_for(int64_t c, int lanes) {
  if (c == 0) return 1;
  while (c % lanes != 0) lanes /= 2;
  return lanes;
}

}  // namespace torus::worker::cpu::vec

#pragma GCC diagnostic pop

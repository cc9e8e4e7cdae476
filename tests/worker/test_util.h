#pragma once
// Helpers for the worker tests: host vectors <-> tensors, deterministic random fills.
#include <cstdint>
#include <random>
#include <vector>

#include "worker/backend/backend.h"

namespace torus::worker::testing {

inline std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

inline double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace torus::worker::testing

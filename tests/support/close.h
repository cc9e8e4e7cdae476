#pragma once
// Element-wise closeness of a computed tensor to a reference, with the tolerance relative to the reference's largest
// finite magnitude (tolerant of cancellation near zero, strict on the bulk). Non-finite reference values (an
// overflow to inf, a NaN) are compared by equality: inf must be the same inf, NaN must be NaN; they do not enter the
// scale, so one inf never turns the tolerance into NaN. Plain C++: tests/gpu_math runs it on the CPU.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace torus::test {

struct CloseReport {
  size_t bad = 0;          // elements outside the tolerance
  size_t first = 0;        // the first of them (meaningful when bad > 0)
  double tolerance = 0.0;  // rtol x the largest finite |want| (at least 1e-6)
};

inline bool close_element(double got, double want, double tolerance) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tolerance;  // false for a NaN or inf `got`
}

inline CloseReport compare_close(const std::vector<float>& got, const std::vector<float>& want, double rtol) {
  CloseReport r;
  double scale = 1e-6;
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  r.tolerance = rtol * scale;
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i)
    if (!close_element(got[i], want[i], r.tolerance) && r.bad++ == 0) r.first = i;
  return r;
}

}  // namespace torus::test

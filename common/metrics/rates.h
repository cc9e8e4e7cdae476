#pragma once
// The rates every reader derives alike from what a rank measures: the gang's images/s, the time left, the
// all-reduce bus bandwidth. The worker's events and metrics, `torus run`'s console, the operator's status and the
// benchmarks all call these, so a figure means the same wherever it is shown.
#include <cstddef>
#include <cstdint>
#include <optional>

namespace torus::metrics {

// Synchronous data parallelism: every rank moves at the gang's pace, so the gang's throughput is world x a rank's.
inline double gang_images_per_second(double rank_images_per_second, int world_size) {
  return rank_images_per_second * (world_size > 1 ? world_size : 1);
}

// Seconds until `steps_total` at `seconds_per_step`; nullopt while the step time is unknown (0 or less).
inline std::optional<double> eta_seconds(int64_t step, int64_t steps_total, double seconds_per_step) {
  if (!(seconds_per_step > 0)) return std::nullopt;
  const int64_t left = steps_total > step ? steps_total - step : 0;
  return seconds_per_step * static_cast<double>(left);
}

// Seconds per step of a gang stepping `global_batch` images at `images_per_second` (0 when either is unknown).
inline double seconds_per_step(int64_t global_batch, double images_per_second) {
  return global_batch > 0 && images_per_second > 0 ? static_cast<double>(global_batch) / images_per_second : 0;
}

// The all-reduce bus bandwidth in bytes/s (nccl-tests' PERFORMANCE.md): the algorithm bandwidth bytes / seconds
// times 2(n-1)/n, what each rank's link carries in a ring all-reduce of `bytes` over `ranks`; 0 for one rank or no
// time. comm::bus_bandwidth is this.
inline double bus_bandwidth(double bytes, double seconds, int ranks) {
  if (seconds <= 0 || ranks <= 1) return 0;
  return bytes / seconds * 2.0 * (ranks - 1) / ranks;
}

}  // namespace torus::metrics

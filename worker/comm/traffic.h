#pragma once
// Volume and time of collectives, for the all-reduce metrics (torus_worker_allreduce_*): per algorithm and level
// from the topology communicator, and from the GPU gradient path (NCCL), whose times come from CUDA events.
#include <compare>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/metrics/metric_names.h"

namespace torus::comm {

// The level of a whole all-reduce; its phases are levels of their own ("inner_reduce_scatter", ...): the metrics'
// `level` label.
inline constexpr const char* kWholeAllReduce = metrics::name::kLevelWholeAllReduce;

// Whose traffic: an algorithm ("ring", "hierarchical", "nccl") at one level of it.
struct TrafficKey {
  std::string algorithm;
  std::string level = kWholeAllReduce;
  auto operator<=>(const TrafficKey&) const = default;
};

struct LevelStats {
  uint64_t calls = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// Totals written by the thread that runs the collectives and read by the metrics sampler.
class TrafficCounter {
 public:
  void add(uint64_t calls, uint64_t bytes, double seconds) {
    std::lock_guard lock(mu_);
    totals_.calls += calls;
    totals_.bytes += bytes;
    totals_.seconds += seconds;
  }
  LevelStats totals() const {
    std::lock_guard lock(mu_);
    return totals_;
  }

 private:
  mutable std::mutex mu_;
  LevelStats totals_;
};

}  // namespace torus::comm

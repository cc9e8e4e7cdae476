#pragma once
// Volume and time of collectives, for the all-reduce metrics (torus_worker_allreduce_*): per algorithm and level
// from the topology communicator, and from the GPU gradient path (NCCL), whose times come from CUDA events.
#include <cstdint>
#include <mutex>

namespace torus::comm {

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

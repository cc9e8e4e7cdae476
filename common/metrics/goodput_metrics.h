#pragma once
// A rank's goodput ledger as Prometheus series (docs/observability.md, "Goodput"):
// torus_worker_goodput_seconds_total{job, namespace, rank, attempt, part} for each process::TimePart, and
// torus_worker_comm_init_seconds (the communicator's share of start-up). Rates of the parts over their sum are the
// share of wall time that trains.
#include <array>
#include <string>

#include "common/metrics/registry.h"
#include "common/process/goodput.h"

namespace torus::metrics {

class GoodputMetrics {
 public:
  GoodputMetrics(Registry& registry, const std::string& job, const std::string& ns, int rank, int attempt);
  // Adds `seconds` to `part` (lock-free).
  void add(process::TimePart part, double seconds) { parts_[static_cast<size_t>(part)]->inc(seconds); }
  void set_comm_init(double seconds) { comm_init_.set(seconds); }

 private:
  std::array<Counter*, process::kTimeParts> parts_{};
  Gauge& comm_init_;
};

}  // namespace torus::metrics

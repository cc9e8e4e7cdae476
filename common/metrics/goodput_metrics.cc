#include "common/metrics/goodput_metrics.h"

#include "common/metrics/metric_names.h"

namespace torus::metrics {

GoodputMetrics::GoodputMetrics(Registry& r, const std::string& job, const std::string& ns, int rank, int attempt)
    : comm_init_(r.gauge(name::kWorkerCommInitSeconds,
                         "Time this attempt's communicator took to rendezvous and connect (Gloo, NCCL): part of "
                         "start-up.",
                         {"job", "namespace", "rank", "attempt"})
                     .labels({job, ns, std::to_string(rank), std::to_string(attempt)})) {
  auto& family = r.counter(name::kWorkerGoodputSecondsTotal,
                           "Where this rank's time went, by part: startup, restore, training (the steps' own work), "
                           "data_wait, comm_wait, evaluation, checkpoint.",
                           {"job", "namespace", "rank", "attempt", "part"});
  for (process::TimePart p : process::kAllTimeParts) {
    parts_[static_cast<size_t>(p)] =
        &family.labels({job, ns, std::to_string(rank), std::to_string(attempt), std::string(process::to_string(p))});
  }
}

}  // namespace torus::metrics

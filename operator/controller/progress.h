#pragma once
// Training progress from rank 0's Prometheus endpoint, copied into the job's status so `kubectl get` shows it.
// Metric names come from common/metrics/worker_metrics.h.
#include <map>
#include <optional>
#include <string>

#include "common/api/training_job.h"

namespace torus::controller {

// The first sample of each metric family in a Prometheus text exposition, by metric name (labels ignored;
// a worker exposes one series per name). Hand-written: Debian ships no Prometheus client parser for C++.
std::map<std::string, double> parse_prometheus_text(const std::string& text);

// Progress from rank 0's samples: epoch, step, loss, accuracy, images/s (whole gang) and an ETA from the
// planned steps. nullopt when the text holds none of the worker's metrics.
std::optional<api::Progress> progress_from_metrics(const std::map<std::string, double>& samples, int world_size,
                                                   const std::string& now_rfc3339);

}  // namespace torus::controller

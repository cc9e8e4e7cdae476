#pragma once
// Training progress from rank 0's Prometheus endpoint, copied into the job's status so `kubectl get` shows it.
// Metric names come from common/metrics/worker_metrics.h.
#include <map>
#include <optional>
#include <string>

#include "common/api/training_job.h"

namespace torus::controller {

// The samples of a Prometheus text exposition: by metric name, the first series of that name (a worker exposes one
// series of most names), and by full series ("name{a=\"x\",...}") every labelled series, for the families a worker
// exposes per label (the all-reduce's, per algorithm and level). Hand-written: Debian ships no Prometheus client
// parser for C++.
std::map<std::string, double> parse_prometheus_text(const std::string& text);

// Progress from rank 0's samples: epoch, step, loss, accuracy, images/s (whole gang), an ETA from the planned
// steps, and the gang-wide all-reduce algorithm that carried the most bytes (the rule of `torus run`'s summary). nullopt when the text holds none of the worker's metrics.
std::optional<api::Progress> progress_from_metrics(const std::map<std::string, double>& samples, int world_size,
                                                   const std::string& now_rfc3339);

}  // namespace torus::controller

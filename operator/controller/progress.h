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
// The value of label `label` in a series key "name{a=\"x\",b=\"y\"}" (parse_prometheus_text's keys), or "".
std::string label_of(const std::string& series, const std::string& label);

// Progress from rank 0's samples: epoch, step, loss, accuracy, images/s (whole gang), an ETA from the planned
// steps, and the gang-wide all-reduce algorithm that carried the most bytes (the rule of `torus run`'s summary). nullopt when the text holds none of the worker's metrics.
std::optional<api::Progress> progress_from_metrics(const std::map<std::string, double>& samples, int world_size,
                                                   const std::string& now_rfc3339);

// The last checkpoint rank 0 wrote in its attempt (torus_worker_last_checkpoint_*), named as the worker names it in
// run `run`'s folder of `checkpoint_dir` (common/launch/checkpoint_layout.h); nullopt when it wrote none yet.
std::optional<api::CheckpointRef> checkpoint_from_metrics(const std::map<std::string, double>& samples,
                                                          const std::string& checkpoint_dir, const std::string& run);

// The step attempt `attempt` resumed from (torus_worker_resumed_step of that attempt's series; 0: it started
// fresh); nullopt before the rank has looked for its checkpoint, or when the series is another attempt's.
std::optional<int64_t> resumed_step_from_metrics(const std::map<std::string, double>& samples, int attempt);

// Where attempt `attempt` started (status.resumedFrom without its time): the step, and from
// torus_worker_resumed_from_info the run whose checkpoint it was and why (Fresh, ThisRun, ResumeFrom; both empty for
// a worker that does not say), the file named in `checkpoint_dir`. nullopt as resumed_step_from_metrics.
std::optional<api::ResumePoint> resumed_from_metrics(const std::map<std::string, double>& samples, int attempt,
                                                     const std::string& checkpoint_dir);

// The ResumedFromStep event's message for `point`: "attempt 1 resumed from step 120 (PATH): this job's own
// checkpoint", "attempt 0 resumed from step 234 (PATH): run R's checkpoint, as spec.training.checkpoint.resumeFrom
// asks", "attempt 2 started at step 0: no checkpoint had been written"; nullopt for a first attempt that starts fresh.
std::optional<std::string> resume_event_message(const api::ResumePoint& point);

}  // namespace torus::controller

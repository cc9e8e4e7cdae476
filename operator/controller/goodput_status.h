#pragma once
// status.goodput from rank 0's Prometheus samples (torus_worker_goodput_seconds_total{part}, the step histogram):
// the current attempt's parts added to the earlier attempts', and at each new attempt the steps the previous one
// lost (the last global step read from it less the step the new one resumed from) times its step time.
// Pure; the progress poller reads, the controller writes. The operator reads rank 0 every poll interval; a failed
// attempt's last step is the one its survivors wrote in their last words (with_step_reached), so its lost work is
// exact; only an attempt whose every rank died without words counts from its last reading (up to one interval less).
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"

namespace torus::controller {

// Rank 0's goodput ledger of one attempt, as its /metrics shows it.
struct GoodputReading {
  int attempt = 0;
  api::GoodputSeconds seconds;
  int64_t global_step = 0;
  double step_seconds = 0;  // mean step time of the attempt (torus_worker_step_seconds sum / count)
  // The attempt's slowest checkpoint save, bounded from above from torus_worker_checkpoint_seconds: the smallest
  // bucket bound that holds every save (the buckets double, so at most 2x the truth), or the sum of the saves when
  // that is smaller (exact for one save; the +Inf bucket). 0: no save yet.
  double slowest_checkpoint_seconds = 0;
  // Whether rank 0 has looked for its checkpoint yet (torus_worker_resumed_step of the attempt is known): a new
  // attempt's reading from before that cannot tell how many steps the restart lost.
  bool resume_known = true;
};

// The slowest save of `attempt` in rank 0's samples, as GoodputReading::slowest_checkpoint_seconds (0: none).
double slowest_checkpoint_from_metrics(const std::map<std::string, double>& samples, int attempt);

// The ledger of `attempt` in rank 0's samples; nullopt when they hold none of it (an older worker, another attempt).
std::optional<GoodputReading> goodput_from_metrics(const std::map<std::string, double>& samples, int attempt);

// The next status.goodput: `before` advanced by `now`. `resumed_step`: the step now's attempt resumed from (when it
// is a later attempt than before's, the steps from there to before.lastStep were lost). `wall_seconds`: since
// status.startTime. A later attempt's reading with !resume_known changes nothing (the next one will count the loss
// from the right step, instead of from step 0). slowestCheckpointSeconds only grows: the grace of later attempts' pods
// must cover the worst save.
api::Goodput next_goodput(const api::Goodput& before, const GoodputReading& now, int64_t resumed_step,
                          double wall_seconds, const std::string& now_rfc3339);

// How long an attempt's pods took from the first one's creation to the last one's container start (their
// creationTimestamp and state.running/terminated.startedAt, to the second as Kubernetes writes them): the scheduling
// part of the ledger, which rank 0's own cannot see. 0 when a pod has not started.
double scheduling_seconds(const std::vector<nlohmann::json>& pods);

// `g` knowing that `attempt` reached global step `step` (a survivor's last words): its last step when `g` holds that
// attempt's figures and had read less, so the next attempt's lost work counts from the step reached, not from the
// last reading. Unchanged otherwise (no reading of that attempt: its parts are unknown, so are its losses).
api::Goodput with_step_reached(const api::Goodput& g, int attempt, int64_t step);

}  // namespace torus::controller

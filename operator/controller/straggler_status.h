#pragma once
// The Straggler condition and events of a Running job (issue 31.3), judged by the StragglerWatch `torus run` uses
// (common/process/straggler.h) from every rank's own goodput ledger as its /metrics shows it: its steps and its data
// wait + training seconds (torus_worker_goodput_seconds_total), i.e. its arrival offset at the all-reduce. The progress
// poller reads the ranks on its period; each read that closes a window (50 steps) sets the condition:
// True (RankArrivesLate) naming rank, pod, node and slowdown while the window's slowest rank is past the threshold,
// False (Recovered) once a window has none; no condition before the first straggler. Pure but for StragglerWatches'
// lock; the controller reads the ranks and writes the status.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/api/training_job.h"
#include "common/process/straggler.h"
#include "operator/controller/planner.h"

namespace torus::controller {

inline constexpr std::string_view kStragglerCondition = "Straggler";

// One rank's cumulative figures of its attempt: optimizer steps and its arrival offsets' sum (data wait + training).
struct RankArrival {
  int64_t steps = 0;
  double offset_s = 0;
};

// A rank's figures of `attempt` in its samples (parse_prometheus_text); nullopt when they hold none of that attempt.
std::optional<RankArrival> rank_arrival_from_metrics(const std::map<std::string, double>& samples, int attempt);

// Where a rank runs: its pod and the pod's node.
struct RankPlace {
  std::string pod;
  std::string node;
};

// The verdict of one closed window applied to `status`'s conditions: the Straggler condition set True, updated, or
// turned False (lastTransitionTime moves only then), and the event to record: a Warning `Straggler` when a rank is
// first named (or another rank is), a Normal `StragglerRecovered` when the condition turns False. Returns the event;
// `changed` says whether the conditions changed.
struct StragglerUpdate {
  bool changed = false;
  std::optional<EventRecord> event;
};
StragglerUpdate apply_straggler_window(api::TrainingJobStatus& status, const process::StragglerWindow& window,
                                       const RankPlace& place, std::optional<int64_t> generation,
                                       const std::string& now_rfc3339);

// One StragglerWatch per Running job and attempt (a new attempt starts new windows). Thread-safe: the controller's
// workers share it.
class StragglerWatches {
 public:
  // Feeds one read of the job's ranks (by rank); returns the verdict of the window it closed, if it closed one.
  std::optional<process::StragglerWindow> feed(const std::string& key, int attempt, int world_size,
                                               const std::map<int, RankArrival>& ranks);
  void forget(const std::string& key);

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<int, process::StragglerWatch>> watches_;  // by job key: attempt, watch
};

}  // namespace torus::controller

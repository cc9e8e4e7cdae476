#pragma once
// A job's goodput ledger as `torus run` keeps it: every attempt's rank-0 ledger (common/process/goodput.h, carried by
// its events), the launcher's own clock for when attempts start, when one fails and when the job ends, and the work
// each failure lost. Pure: fed events and times, it computes; tests drive it with made-up clocks.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/process/goodput.h"
#include "common/process/worker_events.h"

namespace torus::runtime {

using LedgerClock = std::chrono::steady_clock;

// What one failed attempt lost: the steps from its last checkpoint (or its start) to the step it reached.
struct AttemptLoss {
  int attempt = 0;
  int64_t saved_step = 0;    // the checkpoint the next attempt resumes from (or where this one started)
  int64_t reached_step = 0;  // the last step the gang finished before the failure
  double step_s = 0;         // rank 0's step time then
};

// The job's totals: disjoint parts of its wall time.
struct JobGoodput {
  std::vector<AttemptLoss> losses;  // one per failed attempt that had trained
  double wall_s = 0;                // the first attempt's start to the end
  process::RankLedger kept;         // rank 0's parts that count: a failed attempt's up to its last checkpoint
  double lost_work_s = 0;           // lost steps x the step time they ran at (rank 0's recent step time)
  int64_t lost_steps = 0;           // steps redone: the step reached at each failure less its checkpoint's step
  double step_s = 0;                // rank 0's recent step time in the last attempt that stepped (steady state)
  double restart_and_other_s = 0;   // the rest: failure detection, restarts, process start and exit
  // The share of wall time spent on steps whose result was kept (the steps' own work, without waits).
  double ratio() const { return wall_s > 0 ? kept[process::TimePart::kTraining] / wall_s : 0; }
};

class GoodputLedger {
 public:
  void on_attempt_start(int attempt, LedgerClock::time_point now);
  // A worker event (common/process/worker_events.h); rank 0's ledger speaks for the gang.
  void on_event(int rank, const process::WorkerEvent& event, LedgerClock::time_point now);
  // A rank of the current attempt exited with a failure: the first one ends the attempt's useful work.
  void on_failure(LedgerClock::time_point now);
  JobGoodput totals(LedgerClock::time_point end) const;
  // Seconds from the first attempt's first training step (rank 0 started) to the first evaluation at or above the
  // target, on the launcher's clock: restarts, lost work and start-ups in between count.
  std::optional<double> time_to_target_s() const { return time_to_target_s_; }

 private:
  struct Attempt {
    int number = 0;
    LedgerClock::time_point start;
    process::RankLedger latest;                       // rank 0's newest
    process::RankLedger at_checkpoint;                // rank 0's ledger when its last checkpoint was written
    std::optional<LedgerClock::time_point> saved_at;  // that checkpoint (or training's start) on our clock
    int64_t saved_step = 0;                           // its step (or the resumed step)
    int64_t heard_step = 0;                           // the newest step any rank reported
    LedgerClock::time_point heard_at;
    std::optional<LedgerClock::time_point> failed_at;
    std::optional<int64_t> aborted_step;  // the step a surviving rank says it had finished when the gang failed
  };
  Attempt* current() { return attempts_.empty() ? nullptr : &attempts_.back(); }
  static int64_t reached_step_of(const Attempt& a);
  // Rank 0's step time near the attempt's end (its moving mean; warm-up left out).
  static double recent_step_seconds(const Attempt& a);

  std::vector<Attempt> attempts_;
  std::optional<LedgerClock::time_point> first_training_;
  std::optional<double> time_to_target_s_;
};

}  // namespace torus::runtime

#pragma once
// What `torus run` tells a person: a live progress line while the gang trains, and a summary at the end whose
// last line is machine-readable (`RESULT phase=Succeeded accuracy=0.931 ...`). Pure: fed worker events
// (common/process/worker_events.h) and the gang's outcome, it formats text; it never touches a terminal.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/runtime/goodput.h"
#include "operator/runtime/local_gang.h"
#include "common/process/straggler.h"

namespace torus::runtime {

using process::Straggler;  // shared with the operator (common/process/straggler.h)
using process::StragglerWatch;

struct Progress {
  int epoch = 0, epochs = 0;
  int64_t step = 0, steps_total = 0;
  double loss = 0, lr = 0, images_per_s = 0, eta_s = -1;
  std::optional<double> accuracy;  // last validation top-1
};

class RunReport {
 public:
  // An event from `rank`. Rank 0 speaks for the gang (its figures are global); other ranks' starts are counted.
  // `now`: when it arrived, on the launcher's clock (the goodput ledger's clock).
  // Returns a straggler when this event closes a window of steps in which one stood out (straggler.h).
  std::optional<Straggler> on_event(int rank, const nlohmann::json& event,
                                    LedgerClock::time_point now = LedgerClock::now());
  void on_attempt_start(int attempt, LedgerClock::time_point now = LedgerClock::now());
  // A rank of the current attempt failed: the first failure is when the attempt's unsaved work was lost.
  void on_rank_failed(LedgerClock::time_point now = LedgerClock::now()) { goodput_.on_failure(now); }

  const Progress& progress() const { return progress_; }
  // "epoch 2/4 · step 312/940 · loss 0.412 · acc 91.2% · 1987 img/s · ETA 1m02s"
  std::string progress_line() const;
  // Human summary lines followed by the RESULT line.
  // The goodput ledger's figures run to `end`.
  std::vector<std::string> summary(const GangOutcome& outcome, double wall_seconds,
                                   LedgerClock::time_point end = LedgerClock::now()) const;
  const GoodputLedger& goodput() const { return goodput_; }
  std::vector<int> metrics_ports() const { return metrics_ports_; }

 private:
  Progress progress_;
  std::optional<double> final_accuracy_;
  std::optional<double> time_to_target_s_;  // the last attempt's own (its trainer's clock)
  std::optional<double> target_;
  double images_per_s_ = 0;  // from rank 0's "finished" event, else the last progress figure
  double busbw_gbps_ = 0;
  std::string algorithm_;
  uint64_t allreduce_calls_ = 0;  // rank 0's all-reduces with algorithm_, and their bytes
  uint64_t allreduce_bytes_ = 0;
  int attempt_ = 0;  // 0-based
  std::optional<int64_t> resumed_step_;
  std::vector<int> metrics_ports_;
  GoodputLedger goodput_;
  std::optional<StragglerWatch> stragglers_;  // from the first started event's world size
};

// "straggler: rank 1 arrives at the all-reduce after 1.80x the gang's median own work per step (12.3 vs 6.8 ms)"
std::string straggler_line(const Straggler& s);

// "goodput 0.93: training 40.1 s, start-up 1.2 s (communicator 0.3 s), ..." and the RESULT fields of the ledger
// (" goodput=0.930 lost_work_s=3.1 ...").
std::string goodput_line(const JobGoodput& g);
std::string goodput_fields(const JobGoodput& g);

// "1h02m03s", "4m05s", "12s"; "?" for a negative value.
std::string format_duration(double seconds);

}  // namespace torus::runtime

#pragma once
// Where one rank's time went in one attempt (its goodput ledger), as the worker measures it and its events carry it
// (`"ledger": {...}` in the started, progress, checkpoint and finished events; common/process/worker_events.h holds
// its field list).
// The launchers add what a rank cannot see (scheduling, restarts, lost work) to make a job's ledger
// (operator/runtime/goodput.h).
#include <array>
#include <cstdint>
#include <string_view>

namespace torus::process {

// The disjoint parts of a rank's attempt, in the order they first happen.
enum class TimePart : uint8_t {
  kStartup,     // process start to the trainer ready: rendezvous, communicator (comm_init_s), model and data
  kRestore,     // reading the checkpoint it resumes from
  kTraining,    // the steps' own work: step time less its data wait and communication wait
  kDataWait,    // steps blocked on the loader
  kCommWait,    // steps blocked on the gradient all-reduce and the stop agreement
  kEvaluation,  // BN statistics averaged and the validation set evaluated, after each epoch
  kCheckpoint,  // writing checkpoints (rank 0)
};
inline constexpr size_t kTimeParts = 7;
inline constexpr std::array<TimePart, kTimeParts> kAllTimeParts = {
    TimePart::kStartup,  TimePart::kRestore,    TimePart::kTraining,  TimePart::kDataWait,
    TimePart::kCommWait, TimePart::kEvaluation, TimePart::kCheckpoint};
// "startup", "restore", "training", "data_wait", "comm_wait", "evaluation", "checkpoint": the metric's `part` label
// and the ledger's JSON keys (with "_s").
std::string_view to_string(TimePart part);

struct RankLedger {
  std::array<double, kTimeParts> seconds{};  // indexed by TimePart
  double comm_init_s = 0;                    // of startup: the communicator's rendezvous and connections (Gloo/NCCL)
  int64_t steps = 0;                         // optimizer steps this attempt ran
  double step_seconds = 0;                   // their summed wall time (data wait + training + communication wait)
  double recent_step_s = 0;  // moving mean of the step time, the attempt's first (warm-up) step left out

  double& operator[](TimePart p) { return seconds[static_cast<size_t>(p)]; }
  double operator[](TimePart p) const { return seconds[static_cast<size_t>(p)]; }
  double mean_step_seconds() const { return steps > 0 ? step_seconds / static_cast<double>(steps) : 0; }
  // The step time now: the moving mean, else (one step or an older worker) the mean.
  double step_time() const { return recent_step_s > 0 ? recent_step_s : mean_step_seconds(); }
  // Adds one step: its wall time and the waits inside it (data_wait + comm_wait <= step).
  void add_step(double step_s, double data_wait_s, double comm_wait_s);
  bool operator==(const RankLedger&) const = default;
};

}  // namespace torus::process

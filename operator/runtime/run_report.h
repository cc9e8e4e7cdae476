#pragma once
// What `torus run` tells a person: a live progress line while the gang trains, and a summary at the end whose
// last line is machine-readable (`RESULT phase=Succeeded accuracy=0.931 ...`). Pure: fed worker events
// (common/process/worker_events.h) and the gang's outcome, it formats text; it never touches a terminal.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/process/straggler.h"
#include "common/process/worker_events.h"
#include "operator/runtime/goodput.h"
#include "operator/runtime/local_gang.h"

namespace torus::runtime {

using process::Straggler;  // shared with the operator (common/process/straggler.h)
using process::StragglerWatch;

struct Progress {
  int epoch = 0, epochs = 0;
  int64_t step = 0, steps_total = 0;
  double loss = 0, lr = 0, images_per_s = 0;
  std::optional<double> eta_s;
  std::optional<double> accuracy;  // last validation top-1
};

// One finished epoch as rank 0 reported it: its evaluation (validation loss and top-1, the trainer's clock) with the
// epoch's own train loss (rank 0's mean step loss) and the gang's images/s over the epoch. From an older worker
// whose evaluation lacks them: of the progress events it sent during the epoch (one at most every 500 ms), the mean
// loss and the last images/s, empty when none came (an epoch shorter than the event interval).
struct EpochRow {
  int epoch = 0;  // 1-based, as the progress line counts
  std::optional<double> train_loss, images_per_s;
  double val_loss = 0, accuracy = 0;
  double seconds = 0;  // since the previous evaluation of the same attempt (or the attempt's first step)
};

// A terminal draws block characters; a CI log gets plain ASCII.
enum class BarStyle { kUnicode, kAscii };

class RunReport {
 public:
  // An event from `rank`. Rank 0 speaks for the gang (its figures are global); other ranks' starts are counted.
  // `now`: when it arrived, on the launcher's clock (the goodput ledger's clock).
  // Returns a straggler when this event closes a window of steps in which one stood out (straggler.h).
  std::optional<Straggler> on_event(int rank, const process::WorkerEvent& event,
                                    LedgerClock::time_point now = LedgerClock::now());
  void on_attempt_start(int attempt, LedgerClock::time_point now = LedgerClock::now());
  // A rank of the current attempt failed: the first failure is when the attempt's unsaved work was lost.
  void on_rank_failed(LedgerClock::time_point now = LedgerClock::now()) { goodput_.on_failure(now); }

  const Progress& progress() const { return progress_; }
  // Every epoch evaluated so far, in order (a restarted epoch appears again, with the attempt's part of it).
  const std::vector<EpochRow>& epochs() const { return epochs_; }
  // "epoch 2/4 |███▌      |  33% · step 312/940 · loss 0.412 · acc 91.20% · 1987 img/s · ETA 1m02s"
  std::string progress_line(BarStyle style = BarStyle::kUnicode) const;
  // The share of the job's steps done, in [0, 1]; 0 before the first progress event.
  double fraction_done() const;
  // Human summary lines followed by the RESULT line.
  // The goodput ledger's figures run to `end`.
  std::vector<std::string> summary(const GangOutcome& outcome, double wall_seconds,
                                   LedgerClock::time_point end = LedgerClock::now()) const;
  const GoodputLedger& goodput() const { return goodput_; }
  std::vector<int> metrics_ports() const { return metrics_ports_; }

 private:
  // Rank 0's progress events of the epoch under way, for its row.
  struct EpochSamples {
    int epoch = 0, count = 0;
    double loss_sum = 0, last_images_per_s = 0;
  };
  void add_epoch_row(const process::EvaluatedEvent& evaluated);
  void on_started(int rank, const process::StartedEvent& e);
  void on_rank0(const process::ProgressEvent& e);
  void on_rank0(const process::EvaluatedEvent& e);
  void on_rank0(const process::FinishedEvent& e);
  template <class Other>
  void on_rank0(const Other& /*checkpoint, aborted, started: nothing for the summary*/) {}

  Progress progress_;
  EpochSamples samples_;
  std::vector<EpochRow> epochs_;
  double last_evaluation_s_ = 0;  // the attempt's trainer clock at its previous evaluation
  std::optional<double> final_accuracy_;
  std::optional<double> time_to_target_s_;  // the last attempt's own (its trainer's clock)
  std::optional<double> target_;
  double images_per_s_ = 0;  // from rank 0's "finished" event, else the last progress figure
  double busbw_gbps_ = 0;
  std::string algorithm_;
  uint64_t allreduce_calls_ = 0;  // rank 0's all-reduces with algorithm_, and their bytes
  uint64_t allreduce_bytes_ = 0;
  int attempt_ = 0;  // 0-based
  std::string run_;  // rank 0's started event's: the run the workers trained as
  // Where rank 0 of the first attempt started: its step, the checkpoint, whose and why (the started event).
  struct Start {
    int64_t step = 0;
    process::ResumedFrom from;
  };
  std::optional<Start> start_;
  std::optional<int64_t> resumed_step_;  // the last attempt's, when it resumed from a checkpoint
  std::string left_to_train_;            // "": some; else why the run trained nothing ("all epochs done", ...)
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

// Where a run started, as rank 0's started event says: "start: run R trained from step 0 (a new run)", "start: run
// R resumed at step 234 from run Q's checkpoint PATH (spec.training.checkpoint.resumeFrom)", ... (`reason`: Fresh,
// ThisRun, ResumeFrom).
std::string start_line(const std::string& run, const std::string& reason, int64_t step, const std::string& from_run,
                       const std::string& path);

// "1h02m03s", "4m05s", "12s"; "?" for a negative value.
std::string format_duration(double seconds);

// "|████▌     |" for 0.45 over 10 cells (eighths of a cell in kUnicode), "[####      ]" in kAscii; `fraction` is
// clamped to [0, 1].
std::string progress_bar(double fraction, int cells, BarStyle style);

// The epoch table: a header, then one row per epoch, columns aligned; "-" where a figure is missing.
//   "epoch  train loss  val loss  val acc  images/s     time"
//   "    1      1.3184    0.2917   79.69%      3537     0.5s"
std::string epoch_header();
std::string epoch_row(const EpochRow& row);

// `line` cut to `columns` characters (UTF-8 code points, each one column here), so a redrawn line never wraps.
std::string fit_to_width(const std::string& line, int columns);

// When a plain (non-terminal) console prints the progress line: at once for the first, then each time the job
// crosses another tenth of its steps, or `interval` after the last line, whichever comes first; never in between.
// So a CI log gets about ten lines a job however long, and one at least every `interval` while the job moves.
class PlainProgressPacer {
 public:
  explicit PlainProgressPacer(std::chrono::seconds interval = std::chrono::seconds(60)) : interval_(interval) {}
  bool due(double fraction, std::chrono::steady_clock::time_point now);

 private:
  std::chrono::seconds interval_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  int last_tenth_ = -1;
};

}  // namespace torus::runtime

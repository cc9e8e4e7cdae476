#pragma once
// A straggler named while the job runs, by `torus run` and by the operator alike: from each rank's arrival offset at
// the step's all-reduce, the time from the gang's common start of a step (every rank leaves the previous step's
// collectives together) to its own arrival, i.e. its data wait plus its own work, as the ranks' goodput ledgers carry
// them (common/process/goodput.h: on their progress events for `torus run`, as torus_worker_goodput_seconds_total on
// their /metrics for the operator). Step times do not tell: the all-reduce makes every rank's step as long as the
// slowest's. Over a window of steps, a rank whose mean arrival offset is `threshold` times the gang's median or more
// is named. Pure: fed samples or events, it judges; the launchers say it.
#include <cstdint>
#include <map>
#include <optional>

#include "common/process/worker_events.h"

namespace torus::process {

struct Straggler {
  int rank = 0;
  double slowdown = 0;   // its mean arrival offset over the gang's median
  double arrival_s = 0;  // its mean arrival offset per step over the window
  double median_s = 0;   // the gang's median
};

// What one closed window says: its slowest rank (by arrival offset; slowdown 1 when the median is 0) and whether
// that rank is a straggler (slowdown at or over the threshold).
struct StragglerWindow {
  Straggler slowest;
  bool straggling = false;
  double threshold = 0;  // the watch's
};

class StragglerWatch {
 public:
  explicit StragglerWatch(int world_size, int64_t window_steps = 50, double threshold = 1.25)
      : world_(world_size), window_(window_steps), threshold_(threshold) {}
  // One rank's cumulative figures of the attempt: optimizer steps, and data wait + training seconds. Returns the
  // verdict of the window this sample closes (every rank `window_steps` past its window's start); nullopt otherwise,
  // and always for a gang of one.
  std::optional<StragglerWindow> on_sample(int rank, int64_t steps, double arrival_offset_s);
  // A worker event (its ledger is a sample); returns a straggler when this event closes a window in which one stood
  // out and it is news (another rank, or its slowdown moved by 0.2 or more).
  std::optional<Straggler> on_event(int rank, const WorkerEvent& event);
  void on_attempt_start() { windows_.clear(); }
  // The slowest straggler named so far (the summary's).
  const std::optional<Straggler>& worst() const { return worst_; }
  double threshold() const { return threshold_; }

 private:
  struct Window {
    int64_t steps_at_start = -1, steps = 0;
    double offset_at_start = 0, offset = 0;  // cumulative data wait + training seconds
  };
  int world_;
  int64_t window_;
  double threshold_;
  std::map<int, Window> windows_;
  std::optional<Straggler> worst_;
  std::optional<Straggler> named_;  // the last one on_event returned
};

}  // namespace torus::process

#pragma once
// A straggler named while the job runs (`torus run`): from each rank's arrival offset at the step's all-reduce, the
// time from the gang's common start of a step (every rank leaves the previous step's collectives together) to its own
// arrival, i.e. its data wait plus its own work, as the ranks' goodput ledgers carry them on their progress events
// (common/process/goodput.h). Step times do not tell: the all-reduce makes every rank's step as long as the slowest's.
// Over a window of steps, a rank whose mean arrival offset is `threshold` times the gang's median or more is named.
// Pure: fed events, it judges; the console prints.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace torus::runtime {

struct Straggler {
  int rank = 0;
  double slowdown = 0;   // its mean arrival offset over the gang's median
  double arrival_s = 0;  // its mean arrival offset per step over the window
  double median_s = 0;   // the gang's median
};

class StragglerWatch {
 public:
  explicit StragglerWatch(int world_size, int64_t window_steps = 50, double threshold = 1.25)
      : world_(world_size), window_(window_steps), threshold_(threshold) {}
  // A worker event; returns a straggler when this event closes a window in which one stood out and it is news (another
  // rank, or its slowdown moved by 0.2 or more).
  std::optional<Straggler> on_event(int rank, const nlohmann::json& event);
  void on_attempt_start() { windows_.clear(); }
  // The slowest straggler named so far (the summary's).
  const std::optional<Straggler>& worst() const { return worst_; }

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
  std::optional<Straggler> named_;  // the last one returned
};

}  // namespace torus::runtime

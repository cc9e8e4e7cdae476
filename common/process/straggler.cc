#include "common/process/straggler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/process/goodput.h"
#include "common/process/worker_events.h"

namespace torus::process {

std::optional<StragglerWindow> StragglerWatch::on_sample(int rank, int64_t steps, double arrival_offset_s) {
  if (world_ < 2) return std::nullopt;
  Window& w = windows_[rank];
  w.steps = steps;
  w.offset = arrival_offset_s;
  if (w.steps_at_start < 0) {
    w.steps_at_start = w.steps;
    w.offset_at_start = w.offset;
  }
  // A window closes when every rank has reported `window_` steps past its start.
  if (static_cast<int>(windows_.size()) < world_) return std::nullopt;
  std::vector<double> per_step;
  for (const auto& [r, x] : windows_) {
    if (x.steps - x.steps_at_start < window_) return std::nullopt;
    per_step.push_back((x.offset - x.offset_at_start) / static_cast<double>(x.steps - x.steps_at_start));
  }
  std::vector<double> sorted = per_step;
  // The lower median: of two ranks, the faster one is the reference.
  const auto mid = static_cast<long>((sorted.size() - 1) / 2);
  std::nth_element(sorted.begin(), sorted.begin() + mid, sorted.end());
  const double median = sorted[static_cast<size_t>(mid)];
  std::optional<Straggler> slowest;
  size_t i = 0;
  for (auto& [r, x] : windows_) {
    const double mine = per_step[i++];
    if (!slowest || mine > slowest->arrival_s) slowest = Straggler{r, median > 0 ? mine / median : 1, mine, median};
    x.steps_at_start = x.steps;
    x.offset_at_start = x.offset;
  }
  const bool straggling = median > 0 && slowest->arrival_s >= threshold_ * median;
  if (straggling && (!worst_ || slowest->slowdown > worst_->slowdown)) worst_ = slowest;
  return StragglerWindow{*slowest, straggling, threshold_};
}

std::optional<Straggler> StragglerWatch::on_event(int rank, const WorkerEvent& e) {
  const auto* progress = std::get_if<ProgressEvent>(&e);
  if (progress == nullptr) return std::nullopt;
  const RankLedger& l = progress->ledger;
  const auto window = on_sample(rank, l.steps, l[TimePart::kDataWait] + l[TimePart::kTraining]);
  if (!window || !window->straggling) return std::nullopt;
  // Said once per rank, and again only when its slowdown moved by a fifth or more.
  const Straggler& found = window->slowest;
  if (named_ && named_->rank == found.rank && std::abs(found.slowdown - named_->slowdown) < 0.2) return std::nullopt;
  named_ = found;
  return found;
}

}  // namespace torus::process

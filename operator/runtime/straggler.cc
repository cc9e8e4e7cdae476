#include "operator/runtime/straggler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/process/goodput.h"
#include "common/process/worker_events.h"

namespace torus::runtime {

std::optional<Straggler> StragglerWatch::on_event(int rank, const nlohmann::json& e) {
  if (world_ < 2 || e.value("event", "") != process::event::kProgress || !e.contains("ledger")) return std::nullopt;
  const process::RankLedger l = process::rank_ledger_from_json(e["ledger"]);
  Window& w = windows_[rank];
  w.steps = l.steps;
  w.offset = l[process::TimePart::kDataWait] + l[process::TimePart::kTraining];
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
  std::optional<Straggler> found;
  size_t i = 0;
  for (auto& [r, x] : windows_) {
    const double mine = per_step[i++];
    if (median > 0 && mine >= threshold_ * median && (!found || mine > found->arrival_s)) {
      found = Straggler{r, mine / median, mine, median};
    }
    x.steps_at_start = x.steps;
    x.offset_at_start = x.offset;
  }
  if (found && (!worst_ || found->slowdown > worst_->slowdown)) worst_ = found;
  // Said once per rank, and again only when its slowdown moved by a fifth or more.
  if (!found) return std::nullopt;
  if (named_ && named_->rank == found->rank && std::abs(found->slowdown - named_->slowdown) < 0.2) return std::nullopt;
  named_ = found;
  return found;
}

}  // namespace torus::runtime

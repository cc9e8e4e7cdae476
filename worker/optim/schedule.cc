#include "worker/optim/schedule.h"

#include <algorithm>

#include "common/util/error.h"

namespace torus::worker::optim {

LrSchedule::LrSchedule(std::vector<LrPoint> points) : points_(std::move(points)) {
  if (points_.empty()) throw InvalidArgument("lr schedule: needs at least one point");
  for (size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].lr < 0)
      throw InvalidArgument("lr schedule point " + std::to_string(i) + ": lr must be >= 0, got " +
                            std::to_string(points_[i].lr));
    if (i > 0 && points_[i].epoch < points_[i - 1].epoch)
      throw InvalidArgument("lr schedule point " + std::to_string(i) + ": epochs must not decrease, got " +
                            std::to_string(points_[i].epoch) + " after " + std::to_string(points_[i - 1].epoch));
  }
}

LrSchedule LrSchedule::warmup_then_linear_decay(double peak, double warmup_fraction, double epochs) {
  if (epochs <= 0) throw InvalidArgument("lr schedule: epochs must be positive");
  if (warmup_fraction <= 0 || warmup_fraction >= 1) return LrSchedule({{0, peak}, {epochs, 0}});
  return LrSchedule({{0, 0}, {warmup_fraction * epochs, peak}, {epochs, 0}});
}

LrSchedule LrSchedule::one_cycle(double peak, double epochs, double pct_start, double div, double final_div) {
  if (epochs <= 0 || pct_start <= 0 || pct_start >= 1 || div <= 0 || final_div <= 0)
    throw InvalidArgument("lr schedule one_cycle: epochs, div, final_div must be positive, pct_start in (0, 1)");
  return LrSchedule({{0, peak / div}, {pct_start * epochs, peak}, {epochs, peak / final_div}});
}

LrSchedule LrSchedule::warmup_to_peak(double initial, double peak, double warmup_epochs, double epochs,
                                      double final_lr) {
  if (epochs <= 0 || warmup_epochs < 0 || warmup_epochs >= epochs)
    throw InvalidArgument("lr schedule: warmupEpochs must be in [0, epochs), got " + std::to_string(warmup_epochs));
  if (warmup_epochs == 0) return LrSchedule({{0, peak}, {epochs, final_lr}});
  return LrSchedule({{0, initial}, {warmup_epochs, peak}, {epochs, final_lr}});
}

double LrSchedule::at(double epoch) const {
  // The last point at or before `epoch` starts the segment, so two points at one epoch make a step.
  auto hi =
      std::upper_bound(points_.begin(), points_.end(), epoch, [](double e, const LrPoint& p) { return e < p.epoch; });
  if (hi == points_.begin()) return points_.front().lr;
  if (hi == points_.end()) return points_.back().lr;
  auto lo = hi - 1;
  const double t = (epoch - lo->epoch) / (hi->epoch - lo->epoch);
  return lo->lr + t * (hi->lr - lo->lr);
}

}  // namespace torus::worker::optim

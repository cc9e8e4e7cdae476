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

void validate_phases(const std::vector<Phase>& phases, const std::string& field) {
  if (phases.empty()) throw InvalidArgument(field + ": needs at least one phase");
  if (phases.front().start_epoch != 0)
    throw InvalidArgument(field + "[0].startEpoch: the first phase must start at epoch 0");
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (phases[i].batch_size <= 0)
      throw InvalidArgument(at + ".batchSize: must be a positive integer, got " + std::to_string(phases[i].batch_size));
    if (phases[i].image_size <= 0)
      throw InvalidArgument(at + ".imageSize: must be a positive integer, got " + std::to_string(phases[i].image_size));
    if (i > 0 && phases[i].start_epoch <= phases[i - 1].start_epoch)
      throw InvalidArgument(at + ".startEpoch: must increase, got " + std::to_string(phases[i].start_epoch));
  }
}

const Phase& phase_at(const std::vector<Phase>& phases, int64_t epoch) {
  const Phase* current = &phases.at(0);
  for (const Phase& p : phases)
    if (p.start_epoch <= epoch) current = &p;
  return *current;
}

}  // namespace torus::worker::optim

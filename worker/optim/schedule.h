#pragma once
// Learning-rate schedules and training phases: pure functions of the (fractional) epoch, so a resumed run
// computes exactly the rate an uninterrupted one would.
#include <cstdint>
#include <string>
#include <vector>

namespace torus::worker::optim {

struct LrPoint {
  double epoch;  // fractional: epoch + batch / batches_in_epoch
  double lr;
};

// Piecewise linear through the points; constant before the first and after the last.
class LrSchedule {
 public:
  // Points must have non-decreasing epochs (two at one epoch make a step) and non-negative rates; throws
  // InvalidArgument naming the point.
  explicit LrSchedule(std::vector<LrPoint> points);
  // 0 -> peak over the first warmup_fraction of `epochs`, then linearly to 0 at `epochs`.
  static LrSchedule warmup_then_linear_decay(double peak, double warmup_fraction, double epochs);
  // One-cycle (triangular): peak/div -> peak at pct_start of `epochs` -> peak/final_div at the end.
  static LrSchedule one_cycle(double peak, double epochs, double pct_start = 0.25, double div = 25.0,
                              double final_div = 1e4);

  // initial -> peak linearly over warmup_epochs, then linearly to final_lr at `epochs` (the TrainingJob's one-cycle).
  static LrSchedule warmup_to_peak(double initial, double peak, double warmup_epochs, double epochs, double final_lr);

  double at(double epoch) const;
  const std::vector<LrPoint>& points() const { return points_; }

 private:
  std::vector<LrPoint> points_;
};

}  // namespace torus::worker::optim

#include "common/api/resolve.h"

#include <algorithm>
#include <string>

#include "common/util/error.h"

namespace torus::api {
namespace {

template <class T>
T required(const std::optional<T>& value, const char* path) {
  if (!value) throw InvalidArgument(std::string(path) + ": required (apply defaults and validate first)");
  return *value;
}

int32_t global_batch_of(std::optional<int32_t> global, std::optional<int32_t> per_rank, int32_t world,
                        int32_t fallback) {
  if (global) return *global;
  if (per_rank) return *per_rank * world;
  return fallback;
}

double interpolate(double x0, double y0, double x1, double y1, double x) {
  if (x1 <= x0) return y1;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}

double one_cycle_lr(const LrScheduleSpec& s, int32_t epochs, double epoch) {
  const double peak = required(s.peak, "spec.training.lrSchedule.peak");
  const double warmup = s.warmup_epochs.value_or(0.0);
  const double initial = s.initial.value_or(0.0);
  const double final_lr = s.final_lr.value_or(0.0);
  if (epoch < warmup) return interpolate(0, initial, warmup, peak, epoch);
  if (epoch >= epochs) return final_lr;
  return interpolate(warmup, peak, epochs, final_lr, epoch);
}

double piecewise_lr(const std::vector<LrPoint>& points, double epoch) {
  if (points.empty()) throw InvalidArgument("spec.training.lrSchedule.points: required for piecewise-linear");
  if (epoch < points.front().epoch.value_or(0)) return points.front().lr.value_or(0);
  // The last point at or before `epoch` starts the segment, so two points at one epoch make a step.
  for (size_t i = points.size(); i-- > 0;) {
    const double e0 = points[i].epoch.value_or(0);
    if (e0 > epoch) continue;
    if (i + 1 == points.size()) return points[i].lr.value_or(0);
    return interpolate(e0, points[i].lr.value_or(0), points[i + 1].epoch.value_or(0), points[i + 1].lr.value_or(0),
                       epoch);
  }
  return points.back().lr.value_or(0);
}

}  // namespace

int32_t world_size(const TrainingJobSpec& spec) {
  return required(spec.gang.workers, "spec.gang.workers") * spec.gang.processes_per_worker.value_or(1);
}

std::vector<ResolvedPhase> resolve_phases(const TrainingJobSpec& spec) {
  const int32_t world = world_size(spec);
  const TrainingSpec& t = spec.training;
  const int32_t epochs = required(t.epochs, "spec.training.epochs");
  const int32_t batch = global_batch_of(t.batch_size, t.per_rank_batch_size, world, 0);
  if (batch <= 0) throw InvalidArgument("spec.training.batchSize: one of batchSize or perRankBatchSize is required");
  const int32_t image = required(spec.data.image_size, "spec.data.imageSize");
  std::vector<ResolvedPhase> out;
  if (t.phases.empty()) return {{0, epochs, image, batch, batch / world}};
  for (const PhaseSpec& p : t.phases) {
    ResolvedPhase r;
    r.from_epoch = p.from_epoch.value_or(out.empty() ? 0 : out.back().to_epoch);
    r.to_epoch = p.to_epoch.value_or(epochs);
    r.image_size = p.image_size.value_or(image);
    r.global_batch = global_batch_of(p.batch_size, p.per_rank_batch_size, world, batch);
    r.per_rank_batch = r.global_batch / world;
    out.push_back(r);
  }
  return out;
}

const ResolvedPhase& phase_for_epoch(const std::vector<ResolvedPhase>& phases, int32_t epoch) {
  if (phases.empty()) throw InvalidArgument("phases: empty");
  for (const auto& p : phases) {
    if (epoch >= p.from_epoch && epoch < p.to_epoch) return p;
  }
  return epoch < phases.front().from_epoch ? phases.front() : phases.back();
}

std::optional<int64_t> known_train_images(const DataSpec& data) {
  if (!data.dataset) return std::nullopt;
  switch (*data.dataset) {
    case Dataset::kFashionMnist:
      return 60000;
    case Dataset::kCifar10:
      return 50000;
    case Dataset::kSynthetic:
      return data.synthetic.train_images;
    case Dataset::kImageFolder:
      return std::nullopt;
  }
  return std::nullopt;
}

int64_t steps_per_epoch(int64_t train_images, int32_t global_batch) {
  if (global_batch <= 0) throw InvalidArgument("global batch must be positive, got " + std::to_string(global_batch));
  return std::max<int64_t>(1, train_images / global_batch);
}

StepPosition locate_step(const std::vector<ResolvedPhase>& phases, int64_t train_images, int64_t step) {
  StepPosition pos;
  int64_t remaining = std::max<int64_t>(0, step);
  for (const auto& p : phases) {
    const int64_t per_epoch = steps_per_epoch(train_images, p.global_batch);
    const int64_t in_phase = per_epoch * (p.to_epoch - p.from_epoch);
    const bool last = &p == &phases.back();
    if (remaining < in_phase || last) {
      pos.epoch = p.from_epoch + static_cast<int32_t>(remaining / per_epoch);
      pos.step_in_epoch = remaining % per_epoch;
      pos.steps_in_epoch = per_epoch;
      pos.fractional_epoch = static_cast<double>(remaining) / static_cast<double>(per_epoch) + p.from_epoch;
      return pos;
    }
    remaining -= in_phase;
  }
  return pos;
}

int64_t total_steps(const std::vector<ResolvedPhase>& phases, int64_t train_images) {
  int64_t total = 0;
  for (const auto& p : phases) total += steps_per_epoch(train_images, p.global_batch) * (p.to_epoch - p.from_epoch);
  return total;
}

double schedule_lr(const TrainingSpec& training, double fractional_epoch) {
  const LrScheduleSpec& s = training.lr_schedule;
  const LrScheduleKind kind =
      s.type.value_or(s.points.empty() ? LrScheduleKind::kOneCycle : LrScheduleKind::kPiecewiseLinear);
  if (kind == LrScheduleKind::kPiecewiseLinear) return piecewise_lr(s.points, fractional_epoch);
  return one_cycle_lr(s, required(training.epochs, "spec.training.epochs"), fractional_epoch);
}

double learning_rate(const TrainingSpec& training, double fractional_epoch, int32_t global_batch) {
  const double lr = schedule_lr(training, fractional_epoch);
  const auto reference = training.lr_schedule.reference_batch_size;
  return reference && *reference > 0 ? lr * global_batch / *reference : lr;
}

double learning_rate_at_step(const TrainingJobSpec& spec, int64_t train_images, int64_t step) {
  const auto phases = resolve_phases(spec);
  const StepPosition pos = locate_step(phases, train_images, step);
  return learning_rate(spec.training, pos.fractional_epoch, phase_for_epoch(phases, pos.epoch).global_batch);
}

GridShape torus_grid(const TrainingJobSpec& spec) {
  const auto& g = spec.all_reduce.grid;
  if (g.x && g.y) return {*g.x, *g.y};
  return {world_size(spec), 1};
}

int32_t validation_image_size(const TrainingJobSpec& spec) {
  if (spec.training.validation_image_size) return *spec.training.validation_image_size;
  return resolve_phases(spec).back().image_size;
}

}  // namespace torus::api

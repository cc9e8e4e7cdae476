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

void check_phases(const std::vector<ResolvedPhase>& phases, const std::string& field) {
  if (phases.empty()) throw InvalidArgument(field + ": needs at least one phase");
  for (size_t i = 0; i < phases.size(); ++i) {
    const ResolvedPhase& p = phases[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    const int32_t expected_from = i == 0 ? 0 : phases[i - 1].to_epoch;
    if (p.from_epoch != expected_from)
      throw InvalidArgument(at + ".fromEpoch: phases start at epoch 0 and leave no gap: expected " +
                            std::to_string(expected_from) + ", got " + std::to_string(p.from_epoch));
    if (p.to_epoch <= p.from_epoch)
      throw InvalidArgument(at + ".toEpoch: must be after fromEpoch " + std::to_string(p.from_epoch) + ", got " +
                            std::to_string(p.to_epoch));
    if (p.per_rank_batch <= 0)
      throw InvalidArgument(at + ".perRankBatchSize: must be a positive integer, got " +
                            std::to_string(p.per_rank_batch));
    if (p.image_size <= 0)
      throw InvalidArgument(at + ".imageSize: must be a positive integer, got " + std::to_string(p.image_size));
  }
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

int32_t validation_image_size(const TrainingJobSpec& spec) {
  if (spec.training.validation_image_size) return *spec.training.validation_image_size;
  return resolve_phases(spec).back().image_size;
}

}  // namespace torus::api

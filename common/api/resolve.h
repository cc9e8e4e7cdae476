#pragma once
// The runtime values derived from a TrainingJob spec, as pure functions, so that the worker, the local runtime
// and the operator compute them the same way. Inputs are a defaulted, valid spec (defaults.h, validation.h);
// a missing value throws torus::InvalidArgument naming the field.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"

namespace torus::api {

// workers x processesPerWorker.
int32_t world_size(const TrainingJobSpec& spec);

// One progressive-resizing phase with everything resolved: epochs [from_epoch, to_epoch).
struct ResolvedPhase {
  int32_t from_epoch = 0;
  int32_t to_epoch = 0;
  int32_t image_size = 0;
  int32_t global_batch = 0;
  int32_t per_rank_batch = 0;  // global_batch / world size
  bool operator==(const ResolvedPhase&) const = default;
};

// The phases, or one phase over all epochs when the spec lists none; phases inherit the training batch and the
// data image size where they do not set their own.
std::vector<ResolvedPhase> resolve_phases(const TrainingJobSpec& spec);
// The phase that contains `epoch` (the last one for an epoch past the end).
const ResolvedPhase& phase_for_epoch(const std::vector<ResolvedPhase>& phases, int32_t epoch);
// Throws InvalidArgument naming `field` unless the phases start at epoch 0, follow each other without a gap, and
// have positive sizes: what resolve_phases returns for a valid spec, checked again for phases built in code.
void check_phases(const std::vector<ResolvedPhase>& phases, const std::string& field);

// Training images of the data set when it is fixed by the spec (Fashion-MNIST 60000, CIFAR-10 50000, synthetic);
// nullopt for an image folder (count the files).
std::optional<int64_t> known_train_images(const DataSpec& data);

// Optimizer steps per epoch: whole global batches (the last partial batch is dropped), at least 1.
int64_t steps_per_epoch(int64_t train_images, int32_t global_batch);

// Where a global step (counted from 0 over the whole run) falls.
struct StepPosition {
  int32_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t steps_in_epoch = 0;
  double fractional_epoch = 0;  // epoch + step_in_epoch / steps_in_epoch
};
StepPosition locate_step(const std::vector<ResolvedPhase>& phases, int64_t train_images, int64_t step);
int64_t total_steps(const std::vector<ResolvedPhase>& phases, int64_t train_images);

// The learning rate is the worker's (worker/optim/schedule.h through worker/app/job_config.h) and the torus grid the
// communicator's (comm::torus_grid): one formula each, not repeated here.

// validationImageSize, else the last phase's image size.
int32_t validation_image_size(const TrainingJobSpec& spec);

}  // namespace torus::api

#pragma once
// TrainingJob (common/api) -> TrainConfig: the training loop's share of run_options() (run_options.h), where the
// worker reads the spec's model, data and training fields.
#include "common/api/training_job.h"
#include "worker/train/config.h"

namespace torus::worker::app {

// `spec` is defaulted and valid (api::apply_defaults, api::validate); world_size is the gang's rank count.
// The communicator's and engine's options come with it in run_options.h.
train::TrainConfig to_train_config(const api::TrainingJobSpec& spec, int world_size);

// CPU math threads for one rank: spec.gang.threadsPerProcess, else TORUS_NUM_THREADS / the cgroup quota.
int threads_for(const api::TrainingJobSpec& spec);

}  // namespace torus::worker::app

#pragma once
// Everything the training loop needs, decoupled from the TrainingJob spec structs (job_config.h maps one to the
// other; enums are the API's own), so tests and benchmarks can build a run directly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/api/resolve.h"
#include "common/api/training_job.h"
#include "worker/data/image.h"
#include "worker/data/loader.h"
#include "worker/nn/model.h"
#include "worker/optim/schedule.h"
#include "worker/optim/sgd.h"

namespace torus::worker::train {

struct DataConfig {
  api::Dataset dataset = api::Dataset::kSynthetic;
  std::string path;
  // Synthetic sets only.
  int64_t synthetic_train = 2048, synthetic_val = 512;
  int synthetic_classes = 10, synthetic_size = 32, synthetic_channels = 3;
  int loader_threads = 2;
  // Training augmentation; mean/std left empty are computed from the training set (in-memory sets) or set to
  // the ImageNet statistics (image folders).
  data::Transform transform;
  int64_t validation_image_size = 0;  // 0: the data set's native size
  // On: fast.ai's rectangular validation. Evaluation batches are cut from the samples sorted by aspect ratio and each
  // is resized to its mean aspect, validation_image_size being the shorter side (folders of photos of mixed shapes).
  data::Rectangular rectangular_validation = data::Rectangular::kOff;
};

struct CheckpointConfig {
  std::string dir;  // empty: no checkpoints
  // This run (TORUS_RUN_ID): its checkpoints are in dir/run (common/launch/checkpoint_layout.h); "": dir itself.
  std::string run;
  // spec.training.checkpoint.resumeFrom: where the run starts when it has no checkpoint of its own ("latest", a run
  // id; empty: step 0).
  std::string resume_from;
  int64_t every_epochs = 1;
  int64_t every_steps = 0;  // 0: only at epoch ends
  int keep = 2;
  // The launcher saw a checkpoint of this step written (TORUS_RESUME_STEP): finding none is CheckpointLost.
  std::optional<int64_t> resume_step;
};

struct TrainConfig {
  nn::ModelConfig model;  // batch_size/image_size are taken from the first phase
  DataConfig data;
  int64_t epochs = 1;
  // Progressive resizing and batch-size control: epochs [from, to) train with the phase's per-rank batch and image
  // size; at least one, from epoch 0 (api::check_phases). The worker reads per_rank_batch, never global_batch.
  std::vector<api::ResolvedPhase> phases;
  std::vector<optim::LrPoint> lr_points = {{0, 0.1}};
  int64_t lr_reference_batch = 0;  // > 0: lr_points hold for this global batch and scale with the phase's
  optim::SgdConfig sgd;
  float label_smoothing = 0.0f;
  double target_accuracy = 0;  // > 0: stop after the first evaluation at or above it (top-1, 0..1)
  uint64_t seed = 0;
  CheckpointConfig checkpoint;
  int64_t eval_batch_size = 500;  // per rank; to_train_config uses the largest per-rank training batch
  int64_t log_every_steps = 50;
  // spec.training.precision: the activations' dtype and fp16's loss scaling (precision.h); the backend must support it.
  api::Precision precision = api::Precision::kFp32;
};

// Throws InvalidArgument naming the field of the first problem.
void validate(const TrainConfig& config);

}  // namespace torus::worker::train

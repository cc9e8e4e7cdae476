#pragma once
// TrainingJob -> everything a rank runs with, as one pure function: the training loop's TrainConfig
// (to_train_config), the communicator's knobs and the engine's. The job file is the only channel for job knobs;
// a developer override from the environment (common/util/tunables.h) replaces a job value only here, and is
// recorded so that the rank logs it.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/util/tunables.h"
#include "worker/train/config.h"

namespace torus::worker::train {

struct CommRunOptions {
  api::AllReduceAlgorithm algorithm = api::AllReduceAlgorithm::kAuto;
  int grid_x = 0;  // torus2d grid width, 0: the divisor nearest sqrt(world) (comm::torus_grid)
  std::chrono::milliseconds timeout{300000};
  api::Compression compression = api::Compression::kNone;
  size_t first_bucket_bytes = size_t{1} << 20;
  size_t bucket_cap_bytes = size_t{25} << 20;
};

struct EngineRunOptions {
  api::Device device = api::Device::kCpu;
  api::Precision precision = api::Precision::kFp32;
  int threads = 0;  // CPU math threads per rank; 0: TORUS_NUM_THREADS, else the CPUs the rank may use
  uint64_t seed = 0;
};

// An environment variable that replaced a job value.
struct AppliedOverride {
  std::string variable;   // "TORUS_ALLREDUCE_ALGO"
  std::string value;      // "ring"
  std::string field;      // "spec.allReduce.algorithm"
  std::string job_value;  // "auto": what the job said
};

struct RunOptions {
  TrainConfig train;
  CommRunOptions comm;
  EngineRunOptions engine;
  std::vector<AppliedOverride> overrides;
  std::vector<std::string> tunables;  // every developer tunable set ("TORUS_SHM=0"), overriding a job field or not
};

// `spec` is defaulted and valid; world_size is the gang's rank count; `env` the developer overrides.
// Throws InvalidArgument naming the field (or variable) that cannot be honoured.
RunOptions run_options(const api::TrainingJobSpec& spec, int world_size, const tunables::Snapshot& env);

// "TORUS_ALLREDUCE_ALGO=ring overrides spec.allReduce.algorithm (job: auto)".
std::string describe(const AppliedOverride& o);

// The effective configuration, one "key: value" line each (world, batches per phase, precision, seed, checkpoints,
// timeouts, overrides): what rank 0 logs at start. The communicator adds its algorithm choices.
std::vector<std::string> describe(const RunOptions& run, int world_size);

}  // namespace torus::worker::train

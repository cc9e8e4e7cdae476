#pragma once
// (TrainingJob, launch contract, developer tunables) -> everything a rank runs with, computed once by one pure
// function: the training loop's TrainConfig (to_train_config), the communicator's knobs, the engine's and the
// telemetry's. The composition root (worker_main.cc) hands each component its part of this one value and nothing
// else. The job file is the only channel for job knobs; a developer override from the environment
// (common/util/tunables.h) replaces a job value only here, and is recorded so that the rank logs it.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "common/util/tunables.h"
#include "worker/app/telemetry.h"
#include "worker/train/config.h"

namespace torus::worker::app {

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
  int threads = 0;  // CPU math threads per rank (spec.gang.threadsPerProcess); 0: TORUS_NUM_THREADS, else the cgroup's
  uint64_t seed = 0;
  int local_rank = 0;        // GPU ranks: which of the host's devices
  int ranks_per_worker = 1;  // spec.gang.processesPerWorker
};

// An environment variable that replaced a job value.
struct AppliedOverride {
  std::string variable;   // "TORUS_ALLREDUCE_ALGO"
  std::string value;      // "ring"
  std::string field;      // "spec.allReduce.algorithm"
  std::string job_value;  // "auto": what the job said
};

struct RunOptions {
  int rank = 0;
  int world_size = 1;
  train::TrainConfig train;
  CommRunOptions comm;
  EngineRunOptions engine;
  TelemetryOptions telemetry;
  launch::RankEnv launch;  // the launch contract as read: the rendezvous (store, secret, topology) is built from it
  tunables::Snapshot developer;  // the developer tunables the comm layer reads besides the job's knobs (shared memory)
  std::vector<AppliedOverride> overrides;
  std::vector<std::string> tunables;  // every developer tunable set ("TORUS_SHM=0"), overriding a job field or not
};

// `spec` is defaulted and valid; `rank` this process's launch contract (world size, rank, metrics port, ...); `env`
// the developer overrides. Throws InvalidArgument naming the field (or variable) that cannot be honoured.
RunOptions run_options(const api::TrainingJobSpec& spec, const launch::RankEnv& rank, const tunables::Snapshot& env);

// "TORUS_ALLREDUCE_ALGO=ring overrides spec.allReduce.algorithm (job: auto)".
std::string describe(const AppliedOverride& o);

// What no component acting on it describes itself: the world, the all-reduce knobs, the environment overrides and the
// developer tunables, one "key: value" line each. Rank 0 logs them with what the trainer, the backend and the
// communicator say they run (worker_main.cc).
std::vector<std::string> describe(const RunOptions& run);

}  // namespace torus::worker::app

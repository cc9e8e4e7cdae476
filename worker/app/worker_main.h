#pragma once
// The body of torus-worker, its composition root: one rank of a TrainingJob. run_options() is computed once from
// (job, launch contract, tunables); the backend, the communicator, the trainer and the telemetry are each built from
// their part of it, here and nowhere else. Kept out of main.cc so tests can run it in-process.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "worker/app/run_options.h"
#include "worker/app/telemetry.h"
#include "worker/backend/backend.h"
#include "worker/train/trainer.h"

namespace torus::comm {
class World;
class TrafficCounter;
}  // namespace torus::comm

namespace torus::worker::app {

struct WorkerOptions {
  std::string job_file;  // empty: the launch contract's TORUS_JOB_FILE
};

// Parses argv ("--job FILE", optional); throws InvalidArgument with the usage on anything else.
WorkerOptions parse_worker_args(int argc, char** argv);
// --job FILE, else TORUS_JOB_FILE; throws InvalidArgument with the usage when neither names one.
std::string job_file_of(const WorkerOptions& options, const launch::RankEnv& rank_env);

// How the gradients of a rank are averaged across the world, as the communicator that does it describes itself.
struct GradientPath {
  train::GradientSyncFactory factory;
  std::vector<std::string> plan;  // rank 0's effective configuration lines
  std::string algorithm;          // torus_worker_run_info's algorithm label: "ring", "nccl", ...
};

// The machine-dependent part of a rank, the composition root's one dependency: the backend for `run`, and how the
// gradients of a backend whose memory the host collectives must not read (MemorySpace::kDevice) are averaged. Host
// memory always goes through the host reducer over the world communicator (host_gradient_path).
struct BackendFactory {
  std::function<std::unique_ptr<Backend>(const RunOptions&)> make_backend;
  std::function<GradientPath(comm::World&, Backend&, const RunOptions&,
                             const std::shared_ptr<comm::TrafficCounter>& device_traffic)>
      device_gradients;
};

// torus-worker's: make_backend below (CPU or CUDA by run.engine.device), device gradients over NCCL (throws naming
// the field where this worker was built without it).
BackendFactory production_backends();

// Reads the launch contract (common/launch/rank_env.h), loads and validates the job, trains this rank (alone when
// WORLD_SIZE is 1 or unset) on what `backends` makes and returns the exit code: 0 when the run finished (target
// reached or all epochs done). A pod of several local ranks (no RANK, LOCAL_WORLD_SIZE > 1) starts them instead
// (worker/app/local_ranks.h): more processes of this same executable.
int run_worker(const WorkerOptions& options, const BackendFactory& backends);

// The backend run.engine names: the oneDNN CPU engine with its threads, or the GPU of this local rank.
std::unique_ptr<Backend> make_backend(const RunOptions& run);

// The bucketed host reducer over the world communicator, with the planner's algorithm per bucket size. For host
// memory, and for a device whose memory the host can address after all (the tests' pretend device). Only in builds
// with the communication layer (worker/comm).
GradientPath host_gradient_path(comm::World& world, const RunOptions& run);

// What the composition root wires around the trainer of one rank. `comm_plan`: the communicator's description of
// its algorithm per bucket size (empty for one rank); `algorithm`: the run-info label of the gradient path.
struct RankWiring {
  train::Collectives* collectives = nullptr;  // required
  train::GradientSyncFactory sync_factory;    // null: one rank
  train::TrainObserver* observer = nullptr;
  Telemetry* telemetry = nullptr;  // announces the start (with the step resumed from) and the run info
  std::vector<std::string> comm_plan;
  std::string algorithm = "none";
  // The ledger's start-up: from the process's start (run_worker) to the trainer ready, of which the communicator.
  std::chrono::steady_clock::time_point started_at = std::chrono::steady_clock::now();
  double comm_init_seconds = 0;
};

// Trains this rank as `run` says on `backend`: builds the trainer from run.train, resumes from the newest valid
// checkpoint, logs (rank 0) the effective configuration as the trainer, the backend and the communicator describe
// themselves, and runs. The trainer's description lands in `described` when given (tests).
train::RunResult train_job(const RunOptions& run, Backend& backend, const RankWiring& wiring,
                           std::vector<std::string>* described = nullptr);

}  // namespace torus::worker::app

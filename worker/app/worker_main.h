#pragma once
// The body of torus-worker: one rank of a TrainingJob. Kept out of main.cc so tests can run it in-process.
#include <string>

#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {

struct WorkerOptions {
  std::string job_file;  // empty: the launch contract's TORUS_JOB_FILE
};

// Parses argv ("--job FILE", optional); throws InvalidArgument with the usage on anything else.
WorkerOptions parse_worker_args(int argc, char** argv);
// --job FILE, else TORUS_JOB_FILE; throws InvalidArgument with the usage when neither names one.
std::string job_file_of(const WorkerOptions& options, const launch::RankEnv& rank_env);

// Reads the launch contract (common/launch/rank_env.h), loads and validates the job, trains this rank (alone when
// WORLD_SIZE is 1 or unset) and returns the exit code: 0 when the run finished (target reached or all epochs done).
// A pod of several local ranks (no RANK, LOCAL_WORLD_SIZE > 1) starts them instead (worker/train/local_ranks.h).
int run_worker(const WorkerOptions& options);

class Telemetry;

// The same for an already loaded job, with the collectives and gradient averaging of this rank. `telemetry`, when
// given, announces the start (with the step resumed from) to the supervisor.
RunResult train_job(const api::TrainingJob& job, Collectives& collectives, const GradientSyncFactory& sync_factory,
                    TrainObserver* observer, Telemetry* telemetry = nullptr);
// The same on a backend the caller made (the gradient averaging may need it: NCCL on the backend's device and stream).
RunResult train_job(const api::TrainingJob& job, Backend& backend, Collectives& collectives,
                    const GradientSyncFactory& sync_factory, TrainObserver* observer, Telemetry* telemetry = nullptr);

}  // namespace torus::worker::train

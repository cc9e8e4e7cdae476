#pragma once
// CommRunOptions (run_options.h) -> the comm layer's options, and the all-reduce plan rank 0 logs with the effective
// configuration. Only in builds with the communication layer (worker/comm).
#include <string>
#include <vector>

#include "common/util/tunables.h"
#include "worker/app/run_options.h"
#include "worker/comm/bucketing.h"
#include "worker/comm/topology.h"
#include "worker/comm/world.h"

namespace torus::worker::app {

// The job's knobs from `c`, the developer tunables from `env`.
comm::WorldOptions world_options(const CommRunOptions& c, const tunables::Snapshot& env);
comm::ReducerOptions reducer_options(const CommRunOptions& c);
// Per bucket size: the algorithm that runs and why ("the job asks for ring", or the cost model's predictions).
std::vector<std::string> describe_plan(const comm::Planner& planner, const CommRunOptions& c);
// The algorithm of the buckets that carry most bytes (the other buckets): the job's, or the cost model's choice for
// their size on the wire under auto. What torus_worker_run_info's algorithm label says.
api::AllReduceAlgorithm main_algorithm(const comm::Planner& planner, const CommRunOptions& c);

}  // namespace torus::worker::app

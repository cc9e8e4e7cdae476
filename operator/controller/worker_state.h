#pragma once
// What the planner reads from one worker pod: the gang's view of its main container (phase, exit code and time, its
// own last words from the termination message, why it waits) and the disruption Kubernetes announced for it.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "operator/controller/gang_policy.h"

namespace torus::controller {

// The gang's view of one pod's main container (exposed for tests and the local runner's parity checks).
WorkerState worker_state(const nlohmann::json& pod);

// The job's last progress once its gang succeeded: rank 0's result (its `finished` event, from its termination
// message) over `last` (the operator's last reading of its /metrics): the final step, epoch, accuracy and rates, so a
// job that ends before the next reading still shows where it ended. nullopt when no worker left a result.
std::optional<api::Progress> final_progress(const GangObservation& gang, const api::Progress& last,
                                            const std::string& now);

// The pod's DisruptionTarget condition when its status is True (Kubernetes adds it before it evicts, preempts or
// drains the pod), with the pod's node; nullopt otherwise.
std::optional<Disruption> disruption_of(const nlohmann::json& pod);

}  // namespace torus::controller

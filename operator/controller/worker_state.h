#pragma once
// What the planner reads from one worker pod: the gang's view of its main container (phase, exit code and time, its
// own last words from the termination message, why it waits) and the disruption Kubernetes announced for it.
#include <nlohmann/json.hpp>
#include <optional>

#include "operator/controller/gang_policy.h"

namespace torus::controller {

// The gang's view of one pod's main container (exposed for tests and the local runner's parity checks).
WorkerState worker_state(const nlohmann::json& pod);

// The pod's DisruptionTarget condition when its status is True (Kubernetes adds it before it evicts, preempts or
// drains the pod), with the pod's node; nullopt otherwise.
std::optional<Disruption> disruption_of(const nlohmann::json& pod);

}  // namespace torus::controller

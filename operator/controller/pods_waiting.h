#pragma once
// Why a gang that is not running yet cannot start, when the kubelet or the API server says so (docs/operator.md,
// "Pods that cannot start"): a worker container waiting with a reason no wait cures by itself (an image that cannot be
// pulled, a configuration the kubelet refuses), as the job's PodsWaiting condition, True with the kubelet's reason
// and a message naming the pod and the image or setting, False (PodsStarted) once none waits so.
#include <optional>
#include <string>

#include "operator/controller/gang_policy.h"

namespace torus::controller {

struct WhyWaiting {
  std::string reason;   // the kubelet's: ImagePullBackOff, ErrImagePull, CreateContainerConfigError...
  std::string message;  // "pod NAME: <the kubelet's message>"
};

// The container waiting reasons that ask for a user's fix (not ContainerCreating or PodInitializing, which pass).
bool needs_a_fix(const std::string& waiting_reason);

// The first worker (by name) whose container waits for a fix; nullopt when none does.
std::optional<WhyWaiting> why_waiting(const GangObservation& gang);

}  // namespace torus::controller

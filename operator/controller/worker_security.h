#pragma once
// How a worker pod runs (docs/operator.md, "Pod security"): Pod Security "restricted" by default, so a namespace
// that enforces it admits the gang, and the worker image's user can write a new volume:
//   pod        runAsNonRoot, runAsUser and runAsGroup kWorkerUser (the image's user), fsGroup kWorkerUser with
//              fsGroupChangePolicy OnRootMismatch (a fresh claim's root-owned folder becomes the worker's to write;
//              a claim already owned is not walked again), seccompProfile RuntimeDefault
//   container  allowPrivilegeEscalation false, capabilities drop ALL, readOnlyRootFilesystem: what the worker writes
//              is a volume (the checkpoint claim, /dev/shm, and an emptyDir at /tmp)
// The job's pod template overrides any of them field by field (spec.gang.template.spec.securityContext, the worker
// container's securityContext), and a user's own /tmp mount is kept. Pods of `device: gpu` tolerate the
// nvidia.com/gpu:NoSchedule taint GPU nodes carry (NVIDIA's GPU operator, GKE, AKS), next to the template's own.
#include <nlohmann/json.hpp>

#include "common/api/training_job.h"

namespace torus::controller {

// The non-root user of the worker image (scripts/images.py: distroless's "nonroot").
inline constexpr int kWorkerUser = 65532;

// Applies the above to a worker pod built from `job` (its template already merged in).
void apply_worker_security(const api::TrainingJob& job, nlohmann::json& pod);

}  // namespace torus::controller

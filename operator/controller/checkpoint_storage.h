#pragma once
// The checkpoint storage contract of the operator path (docs/operator.md, "Checkpoints"): a gang that restarts
// resumes from `training.checkpoint.dir`, so that folder must be on storage that outlives the worker pods. Either
//   - the worker container mounts a volume that outlives pods at `dir` or above it (persistentVolumeClaim,
//     hostPath, nfs, csi, and the other network or cloud disks; not emptyDir, configMap, secret, ephemeral...),
//     through spec.gang.template, or
//   - `training.checkpoint.volumeClaimTemplate` is set: the operator creates the claim `<job>-checkpoint`, owned by
//     the job (it outlives every attempt and goes with the job), and mounts it at `dir` in worker 0's pod.
// Only rank 0 (worker 0's first process) reads and writes checkpoints: it loads the newest and broadcasts the
// state to every rank. So a ReadWriteOnce claim on worker 0 suffices; the other workers need no volume.
// A job whose restartPolicy restarts gangs (OnFailure, ExitCode) and whose dir is on no such storage is refused
// (InvalidSpec, the field named) before any pod is made.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/api/field_error.h"
#include "common/api/training_job.h"

namespace torus::controller {

inline constexpr std::string_view kCheckpointVolume = "torus-checkpoint";
inline std::string checkpoint_claim_name(const std::string& job) { return job + "-checkpoint"; }

// The contract's violations (empty when the job keeps its checkpoints on storage that outlives pods).
api::FieldErrors checkpoint_storage_errors(const api::TrainingJob& job);

// The claim made from volumeClaimTemplate (owned by the job); nullopt when the job has none.
std::optional<nlohmann::json> build_checkpoint_claim(const api::TrainingJob& job);

// Adds the claim's volume and its mount at checkpoint.dir to worker `index`'s pod spec (worker 0 only; no-op without
// a volumeClaimTemplate).
void mount_checkpoint_claim(const api::TrainingJob& job, int index, nlohmann::json& pod_spec);

}  // namespace torus::controller

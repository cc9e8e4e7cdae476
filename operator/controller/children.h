#pragma once
// The objects the operator creates for a TrainingJob: a headless Service (stable DNS for rank 0), a ConfigMap
// with the resolved spec (rewritten before each attempt's pods are created), a Secret with the rendezvous secret,
// and one pod per worker. Pure builders.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "operator/controller/topology_blocks.h"

namespace torus::controller {

using json = nlohmann::json;

// A worker that takes at least this many GPUs is assumed to take a whole node (one pod per node).
inline constexpr int kWholeNodeGpus = 8;

// The controller owner reference (with blockOwnerDeletion) pointing at the job.
json owner_reference(const api::TrainingJob& job);
// Labels every child carries: managed-by, job name, attempt (0-based: the first attempt is 0).
json child_labels(const api::TrainingJob& job, int attempt);

json build_service(const api::TrainingJob& job, int attempt);
// With `blocks` kMounted, the node -> block map goes in next to job.json (kBlocksFileName).
json build_config_map(const api::TrainingJob& job, int attempt, const BlocksPlan& blocks = {});
// The same with the job's spec_hash() already computed (a pass computes it once for all of its children).
json build_config_map(const api::TrainingJob& job, int attempt, const BlocksPlan& blocks, const std::string& hash);
json build_secret(const api::TrainingJob& job, int attempt, const std::string& secret);
// Worker pod `index` of `attempt` (0-based). `job` must be defaulted.
// With `blocks` kMounted, the worker gets TORUS_TOPOLOGY_KEY and TORUS_TOPOLOGY_BLOCKS_FILE.
json build_worker_pod(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks = {});
json build_worker_pod(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks,
                      const std::string& hash);

// The gang's PodGroup, so the scheduler places all of its minMember pods at once or none (no half-started gang
// holding GPUs). Made when schedulingPolicy.schedulerName is set and podGroup is not (a named podGroup is the
// user's own): Volcano's (scheduling.volcano.sh/v1beta1, with queue and priority class) for schedulerName
// "volcano", else the coscheduling plugin's (scheduling.x-k8s.io/v1alpha1). minMember is minAvailable (default: the
// gang's workers). nullopt when no PodGroup is wanted.
std::optional<json> build_pod_group(const api::TrainingJob& job, int attempt);
inline constexpr std::string_view kVolcanoScheduler = "volcano";

// The launch contract's rank environment of worker pod `index` (common/launch/rank_env.h): one rank when
// processesPerWorker is 1, else the pod's LOCAL_WORLD_SIZE local ranks, started by torus-worker in the pod.
launch::RankEnv pod_rank_env(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks = {});
// The fingerprint of the job's attempt spec (spec_edits.h) that its ConfigMap and pods carry. `job` must be defaulted.
std::string spec_hash(const api::TrainingJob& job);

// rank 0's stable DNS name through the headless service: <job>-worker-0.<job>.<ns>.svc
std::string master_address(const api::TrainingJob& job);

// JSON merge (RFC 7386 semantics for objects: a null in `overlay` removes the key; lists of named items merged by
// "name"), `overlay` wins.
json merge_objects(const json& base, const json& overlay);

}  // namespace torus::controller

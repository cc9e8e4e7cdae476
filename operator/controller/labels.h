#pragma once
// Names the operator puts on the objects it owns. Child names are deterministic, so that a restarted operator
// (or a stale cache) can never create a second pod for the same worker.
#include <string>
#include <string_view>

namespace torus::controller {

// The names below as strings, for JSON keys and concatenation.
inline std::string str(std::string_view s) { return std::string(s); }

inline constexpr std::string_view kLabelJobName = "torus.dev/job-name";
inline constexpr std::string_view kLabelAttempt = "torus.dev/attempt";
inline constexpr std::string_view kLabelWorkerIndex = "torus.dev/worker-index";
inline constexpr std::string_view kLabelRole = "torus.dev/role";
inline constexpr std::string_view kLabelManagedBy = "app.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "torus-operator";
// Gang scheduling: coscheduling (scheduler-plugins) label and Volcano annotation.
inline constexpr std::string_view kLabelPodGroup = "scheduling.x-k8s.io/pod-group";
inline constexpr std::string_view kAnnotationVolcanoGroup = "scheduling.k8s.io/group-name";
// On the ConfigMap and every pod: the fingerprint of the attempt spec they carry (spec_edits.h) and its generation.
inline constexpr std::string_view kAnnotationSpecHash = "torus.dev/spec-hash";
inline constexpr std::string_view kAnnotationGeneration = "torus.dev/generation";
// Where a worker pod's terminationGracePeriodSeconds came from (termination_grace.h describe_grace).
inline constexpr std::string_view kAnnotationTerminationGrace = "torus.dev/termination-grace";
// The controller this operator answers to in spec.runPolicy.managedBy.
inline constexpr std::string_view kControllerName = "torus.dev/operator";

inline constexpr std::string_view kWorkerContainer = "worker";
// Multi-process pods: the memory-backed emptyDir at /dev/shm.
inline constexpr std::string_view kShmVolume = "torus-shm";
// The container (and Service) port of local rank k's /metrics: "metrics", "metrics-1", "metrics-2", ...
inline std::string metrics_port_name(int local_rank) {
  return local_rank == 0 ? "metrics" : "metrics-" + std::to_string(local_rank);
}
inline constexpr std::string_view kJobFileDir = "/etc/torus/job";
inline constexpr std::string_view kJobFileName = "job.json";
inline constexpr std::string_view kSecretDir = "/etc/torus/rendezvous";
inline constexpr std::string_view kSecretKey = "secret";

inline std::string worker_pod_name(const std::string& job, int index) {
  return job + "-worker-" + std::to_string(index);
}
// The headless Service, the ConfigMap and the Secret share the job's name with a suffix.
inline std::string service_name(const std::string& job) { return job; }
inline std::string config_map_name(const std::string& job) { return job + "-config"; }
inline std::string secret_name(const std::string& job) { return job + "-rendezvous"; }
// Selector of everything the operator owns (informers watch with it).
inline std::string owned_selector() { return std::string(kLabelManagedBy) + "=" + std::string(kManagedByValue); }

}  // namespace torus::controller

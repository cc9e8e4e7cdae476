#pragma once
// The pods/eviction subresource, as kube-apiserver's EvictionREST (pkg/registry/core/pod/storage/eviction.go)
// answers it: a POST of a policy/v1 (or policy/v1beta1) Eviction to /api/v1/namespaces/NS/pods/NAME/eviction is
// what `kubectl drain`, cluster autoscalers and descheduler call instead of a DELETE.
//
// - A pod that is Pending, finished (Succeeded, Failed) or already being deleted is deleted at once: it cannot count
//   towards a budget.
// - Otherwise the PodDisruptionBudgets (policy/v1) of its namespace whose selector matches its labels decide:
//   none, evicted; several, 500 ("more than one PodDisruptionBudget"); one, its status decides, as the disruption
//   controller left it: observedGeneration behind generation (or no status at all) is 429 "still being processed"
//   (Retry-After 10), disruptionsAllowed 0 is 429 naming desired and current healthy pods, negative is 403; else it
//   is decremented and the pod entered in status.disruptedPods (a status write, retried on conflict). An unready pod
//   of a budget that is met is evicted without spending it. The stand-in runs no disruption controller: a test (or
//   nothing) writes the budget's status.
// - Evicting is: the DisruptionTarget condition (True, reason EvictionByEvictionAPI, message "Eviction API:
//   evicting") added to the pod's status, then the pod deleted with the Eviction's deleteOptions (its grace period,
//   preconditions), so the kubelet stops it as for a DELETE: SIGTERM, SIGKILL after the grace.
// - The answer is 201 Created with a Status "Success"; 404 for a missing pod; 400 when the Eviction names another
//   pod than the URL, or its dry-run options contradict the request's. Dry run changes nothing.
#include <nlohmann/json.hpp>
#include <string>

#include "tests/apiserver/store.h"

namespace torus::standin {

// Evicts pod `ns`/`name` as the eviction subresource does; `eviction` is the request's body, `dry_run` the request's
// dryRun parameter. Returns the Status to answer (its code is the HTTP status: 201, or 500 for several budgets);
// throws ApiError for the refusals.
json evict_pod(Store& store, const std::string& ns, const std::string& name, const json& eviction, DryRun dry_run);

// The reason and message of the condition an eviction adds.
inline constexpr const char* kEvictionReason = "EvictionByEvictionAPI";
inline constexpr const char* kEvictionMessage = "Eviction API: evicting";

// addConditionAndDeletePod: the DisruptionTarget condition (True, `reason`, `message`) on the pod's latest status,
// honouring the deletion's preconditions, then the deletion; what the eviction subresource and the taint manager do.
void add_condition_and_delete(Store& store, const ResourceType& pods, const std::string& ns, const std::string& name,
                              DeleteOptions options, const char* reason = kEvictionReason,
                              const char* message = kEvictionMessage);

}  // namespace torus::standin

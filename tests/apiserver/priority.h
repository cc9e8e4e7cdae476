#pragma once
// Pod priority as kube-apiserver resolves it: the Priority admission plugin (plugin/pkg/admission/priority/
// admission.go) and scheduling.k8s.io/v1 PriorityClass (defaults and validation as pkg/apis/scheduling/v1 and
// pkg/apis/scheduling/validation have them, the two system classes the apiserver creates at start).
//
// A new pod's spec.priorityClassName must name a PriorityClass, else 403
//   pods "w-0" is forbidden: no PriorityClass with name gold was found
// and its spec.priority and spec.preemptionPolicy are filled in from the class (without a name: from the class marked
// globalDefault, else priority 0 and PreemptLowerPriority).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"

namespace torus::standin {

inline constexpr int64_t kHighestUserDefinablePriority = 1000000000;

// system-node-critical (2000001000) and system-cluster-critical (2000000000).
std::vector<json> system_priority_classes();

// The plugin on a pod create: `classes` are the stored PriorityClasses; `name` is how the refusal names the pod (its
// generateName when the name is still to be generated, as the mutating phase sees it). Throws ApiError 403.
void admit_pod_priority(json& pod, const std::string& name, const std::vector<const json*>& classes);
// The plugin on a pod update: a priority the update leaves out is kept (validation then refuses any other change).
void keep_pod_priority(const json& before, json& after);

// preemptionPolicy defaults to PreemptLowerPriority.
void default_priority_class(json& priority_class);
// Validation of a create (`before` null) or update: the value's ceiling, the reserved "system-" prefix, value and
// preemptionPolicy immutable. Empty when valid.
std::vector<Cause> validate_priority_class(const json& priority_class, const json* before);
// The plugin on a PriorityClass create or update: only one class may be globalDefault (403).
void admit_priority_class(const json& priority_class, const json* before, const std::vector<const json*>& classes);

}  // namespace torus::standin

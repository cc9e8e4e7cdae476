#pragma once
// The fields of built-in kinds (Pod, Service, ConfigMap, Secret, ServiceAccount, PersistentVolumeClaim, Namespace,
// Deployment, PodDisruptionBudget, Role, RoleBinding, ClusterRole, ClusterRoleBinding, PriorityClass), checked as the apiserver
// decodes them, against a schema the stand-in did not write: the Kubernetes models the official Python client ships
// (tests/apiserver/schemas/builtin-kinds.json, extracted from PyPI kubernetes 37.0.2 by extract_builtin_schema.py).
// Internal to tests/apiserver.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

// How a field's path is written: as the decoder names it ("spec.containers[0].imagee", strict decoding errors) or as
// server-side apply's typed patch does (".spec.containers[name=\"c\"].imagee": list elements by their name).
enum class PathStyle { kDecoder, kApply };

struct FieldProblems {
  std::vector<std::string> unknown;  // "spec.replicass", "spec.template.spec.containers[0].imagee"
  std::string mistyped;  // the first: "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas
                         // of type int"
};

// Checks `object` of `api_version` `kind` and removes its unknown fields (decoding into the Go types drops them).
// Kinds outside the schema are left alone. A value the model says is a string may also be a number (the Python
// models type Quantity as a string; the apiserver accepts `cpu: 1`). Throws torus::CorruptData when the schema file
// cannot be read.
FieldProblems check_builtin_fields(const std::string& api_version, const std::string& kind, nlohmann::json& object,
                                   PathStyle style = PathStyle::kDecoder);

// The schema's provenance ("PyPI kubernetes 37.0.2 (OpenAPI document release-1.37), ...").
std::string builtin_schema_source();

}  // namespace torus::standin

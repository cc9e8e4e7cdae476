#pragma once
// Test helper for crd_oracle_test.cc: TrainingJobs made from a valid one by changing one field, for every field the
// CRD's schema names (and the schema's own boundaries: minimum/maximum, lengths, enums, formats, list types), so a
// differential test covers the whole schema rather than the hand-written corpus alone. Whether each probe is valid is
// not decided here: the two validators under comparison decide.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::api::testing {

struct Probe {
  std::string name;  // "spec.gang.workers = 4097", "spec.gang.workers removed"
  nlohmann::json document;
};

// Probes of every property under `root` ("spec", "status") of `schema` (a CRD version's openAPIV3Schema), each a
// copy of `base` with one change. Properties `base` lacks are added (with their parents) before being probed.
std::vector<Probe> schema_probes(const nlohmann::json& schema, const nlohmann::json& base, const std::string& root);

// Probes of the resource's own fields: metadata.name (length, pattern, missing), apiVersion, kind, null spec.
std::vector<Probe> envelope_probes(const nlohmann::json& base);

}  // namespace torus::api::testing

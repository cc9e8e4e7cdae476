#pragma once
// The patch formats of the Kubernetes API: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic
// merge patch (lists merged by key for the built-in types, with the $patch / $setElementOrder /
// $deleteFromPrimitiveList / $retainKeys directives kubectl sends).
#include <nlohmann/json.hpp>
#include <string>

namespace torus::standin {

enum class PatchType { kMerge, kJsonPatch, kStrategicMerge, kApply };

enum class ListStrategy { kReplace, kMergeByKey, kMergePrimitives };

struct ListRule {
  ListStrategy strategy;
  std::string key;  // the merge key of kMergeByKey
};

// How a built-in type's list field merges (its patchStrategy/patchMergeKey), by field name; `sample_items` decide
// between ports keyed by containerPort and by port. Strategic merge patch and server-side apply both use it.
ListRule list_rule(const std::string& field, const nlohmann::json& sample_items);

// Maps a Content-Type to a patch type; throws ApiError 415 for any other.
PatchType patch_type_from_content_type(const std::string& content_type);

// Returns the patched copy of `original`. Throws ApiError (400 or 422) when the patch is malformed or an RFC 6902
// operation fails.
nlohmann::json apply_patch(PatchType type, const nlohmann::json& original, const nlohmann::json& patch);

// Strategic merge patch on its own (exposed for tests). Built-in list fields merge by their patchMergeKey
// (containers by name, env by name, ports by containerPort/port, conditions by type, ...); other lists replace.
nlohmann::json strategic_merge(const nlohmann::json& original, const nlohmann::json& patch);

}  // namespace torus::standin

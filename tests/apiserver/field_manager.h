#pragma once
// Field ownership as the apiserver keeps it in metadata.managedFields (structured-merge-diff): which manager set
// which field, by Apply (server-side apply) or by Update (any other write), and what server-side apply does with it:
// merge the applied configuration, refuse a change of a field another manager owns (409, unless forced), and
// remove the fields a manager applied before and no longer applies.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace torus::standin {

using json = nlohmann::json;

// One field as FieldsV1 names its steps: "f:spec", then "k:{\"name\":\"web\"}" for an item of a list keyed by a
// merge key, "v:\"finalizer\"" for an item of a set of scalars.
using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// Lists of built-in types merge by their patchMergeKey (containers by name, ...); a custom resource's lists are
// atomic (the stand-in's CRDs declare no x-kubernetes-list-type: map).
enum class ListSemantics { kBuiltin, kAtomic };

// Which part of the object a write may touch: everything but status (the main endpoint of a type with a status
// subresource), only status (the status subresource), or everything (types without one).
enum class FieldScope { kAll, kAllButStatus, kStatusOnly };

enum class ManagerOperation { kApply, kUpdate };

// One entry of metadata.managedFields.
struct ManagedEntry {
  std::string manager;
  ManagerOperation operation = ManagerOperation::kUpdate;
  std::string api_version;
  std::string subresource;  // "" or "status"
  std::string time;
  FieldSet fields;
};

// metadata.managedFields of `object` (entries that do not parse are dropped, as the apiserver resets them).
std::vector<ManagedEntry> managed_entries(const json& object);
json managed_fields_json(const std::vector<ManagedEntry>& entries);

// Every field `object` sets within `scope`; apiVersion, kind and server-owned metadata (name, uid,
// resourceVersion, ...) belong to no manager.
FieldSet fields_of(const json& object, ListSemantics lists, FieldScope scope);
json to_fields_v1(const FieldSet& fields);
FieldSet from_fields_v1(const json& fields_v1);
// The value at `path`, nullopt when the object does not set it.
std::optional<json> value_at(const json& object, const FieldPath& path);
// ".spec.containers[name=\"web\"].image": how conflict messages name a field.
std::string describe_path(const FieldPath& path);

// A conflict of an apply with a field another manager owns.
struct FieldConflict {
  std::string manager;
  std::string api_version;
  FieldPath path;
};

// Server-side apply of `applied` (a full configuration of the fields this manager cares about) onto `live` (null:
// the object does not exist yet). Returns the object with its new managedFields, or the conflicts when the apply
// changes a field another manager owns and `force` is off (forced, the other managers lose those fields).
struct ApplyOutcome {
  json object;
  std::vector<FieldConflict> conflicts;
};
enum class Force { kNo, kYes };
ApplyOutcome server_side_apply(const json* live, const json& applied, const std::string& manager,
                               const std::string& subresource, ListSemantics lists, FieldScope scope, Force force,
                               const std::string& now);

// The managedFields after a write that is not an apply (create, update, patch): `manager` owns what it changed,
// other managers lose it, and fields the write removed leave every manager. `before` is null for a create.
json track_update(const json* before, const json& after, const std::string& manager, const std::string& subresource,
                  ListSemantics lists, FieldScope scope, const std::string& now);

}  // namespace torus::standin

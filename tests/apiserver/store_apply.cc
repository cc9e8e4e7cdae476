// Server-side apply and field ownership in the store: what `kubectl apply --server-side` and Helm 4 (which creates
// and upgrades with apply patches) see from an apiserver.
#include <map>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/builtin_schema.h"
#include "tests/apiserver/store.h"

namespace torus::standin {
namespace {

ListSemantics lists_of(const ResourceType& type) {
  return type.origin == Origin::kCustom ? ListSemantics::kAtomic : ListSemantics::kBuiltin;
}

FieldScope scope_of(const ResourceType& type, Subresource subresource) {
  if (subresource == Subresource::kStatus) return FieldScope::kStatusOnly;
  return type.status == StatusSubresource::kPresent ? FieldScope::kAllButStatus : FieldScope::kAll;
}

std::string subresource_name(Subresource subresource) { return subresource == Subresource::kStatus ? "status" : ""; }

// 409 as the apiserver words it: "Apply failed with 2 conflicts: conflicts with \"helm\" using v1:\n- .a\n- .b".
ApiError apply_conflict(const ResourceType& type, const std::string& name, const std::vector<FieldConflict>& found) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> by_manager;
  std::vector<Cause> causes;
  for (const FieldConflict& c : found) {
    const std::string who = "conflict with \"" + c.manager + "\"" + (c.api_version.empty() ? "" : " using " + c.api_version);
    by_manager[{c.manager, c.api_version}].push_back(describe_path(c.path));
    causes.push_back({"FieldManagerConflict", who, describe_path(c.path)});
  }
  std::string message = "Apply failed with " + std::to_string(found.size()) +
                        (found.size() == 1 ? " conflict: " : " conflicts: ");
  bool first = true;
  for (const auto& [who, paths] : by_manager) {
    if (!first) message += "\n";
    first = false;
    const std::string using_version = who.second.empty() ? "" : " using " + who.second;
    if (paths.size() == 1 && found.size() == 1) {
      message += "conflict with \"" + who.first + "\"" + using_version + ": " + paths[0];
    } else {
      message += "conflicts with \"" + who.first + "\"" + using_version + ":";
      for (const std::string& p : paths) message += "\n- " + p;
    }
  }
  return ApiError(409, "Conflict", message, StatusDetails{name, type.group, type.plural, std::move(causes), 0});
}

void check_applied(const ResourceType& type, const std::string& name, const json& applied) {
  if (!applied.is_object()) throw bad_request("the apply patch must be an object (a YAML or JSON configuration)");
  if (applied.value("apiVersion", "").empty() || applied.value("kind", "").empty()) {
    throw bad_request("invalid object type: apiVersion and kind must be set in an apply patch");
  }
  if (applied.value("kind", "") != type.kind) {
    throw bad_request("the kind in the data (" + applied.value("kind", "") + ") does not match the expected kind (" +
                      type.kind + ")");
  }
  const json metadata = applied.value("metadata", json::object());
  if (metadata.contains("managedFields")) throw bad_request("metadata.managedFields must be nil");
  const std::string body_name = metadata.value("name", "");
  if (body_name != name) {
    throw bad_request("the name of the object (" + body_name + ") does not match the name on the URL (" + name + ")");
  }
}

// A built-in kind's apply patch is converted to its typed form first, which fails on a field the schema does not
// declare, whatever the field validation: "failed to create typed patch object (ns/name; apps/v1, Kind=Deployment):
// .spec.replicass: field not declared in schema". The apiserver answers it 500 (kubernetes/kubernetes#122480).
void check_applied_fields(const ResourceType& type, const std::string& ns, const std::string& name,
                          const json& applied) {
  if (type.origin != Origin::kBuiltIn) return;
  json copy = applied;
  const FieldProblems problems = check_builtin_fields(type.api_version(), type.kind, copy, PathStyle::kApply);
  if (problems.unknown.empty()) return;
  std::string message = "failed to create typed patch object (" + (type.namespaced() ? ns : "") + "/" + name + "; " +
                        type.group + "/" + type.version + ", Kind=" + type.kind + "):";
  for (const std::string& path : problems.unknown) {
    message += (problems.unknown.size() > 1 ? "\n" : " ") + path + ": field not declared in schema";
  }
  throw ApiError(500, "", message);
}

}  // namespace

void Store::own_fields(const ResourceType& type, const json* before, json& after, const json& preset,
                       Subresource subresource, const WriteOptions& options) {
  if (!after.contains("metadata") || !after["metadata"].is_object()) after["metadata"] = json::object();
  if (options.ownership == FieldOwnership::kPresetByApply) {
    after["metadata"]["managedFields"] = preset;
  } else {
    after["metadata"]["managedFields"] = track_update(before, after, options.field_manager,
                                                      subresource_name(subresource), lists_of(type),
                                                      scope_of(type, subresource), now_rfc3339());
  }
  if (after["metadata"]["managedFields"].empty()) after["metadata"].erase("managedFields");
}

WriteResult Store::apply(const ResourceType& type, const std::string& ns, const std::string& name, const json& applied,
                         Subresource subresource, const WriteOptions& options, Force force) {
  if (options.field_manager.empty()) {
    throw invalid("PatchOptions.meta.k8s.io", "meta.k8s.io", "",
                  {{"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"}});
  }
  check_applied(type, name, applied);
  check_applied_fields(type, ns, name, applied);
  std::lock_guard lock(mutex_);
  const ObjectPtr old = find_locked(type.group_resource(), object_key(type.namespaced() ? ns : "", name));
  WriteOptions preset = options;
  preset.ownership = FieldOwnership::kPresetByApply;
  const std::string now = now_rfc3339();
  if (old == nullptr) {
    if (subresource == Subresource::kStatus) throw not_found(type.group_resource(), type.group, name);
    ApplyOutcome outcome = server_side_apply(nullptr, applied, options.field_manager, "", lists_of(type),
                                             scope_of(type, subresource), force, now);
    return create_locked(type, ns, std::move(outcome.object), preset);
  }
  const ObjectPtr served = as_version(old, type);
  ApplyOutcome outcome = server_side_apply(served.get(), applied, options.field_manager, subresource_name(subresource),
                                           lists_of(type), scope_of(type, subresource), force, now);
  if (!outcome.conflicts.empty()) throw apply_conflict(type, name, outcome.conflicts);
  // A resourceVersion in the applied configuration is a precondition; otherwise the apply is to the current one.
  const bool names_rv = applied.value("metadata", json::object()).contains("resourceVersion");
  if (!names_rv) outcome.object["metadata"]["resourceVersion"] = (*old)["metadata"].value("resourceVersion", "");
  return update_locked(type, ns, name, std::move(outcome.object), subresource, preset, false);
}

}  // namespace torus::standin

#include "tests/apiserver/store.h"

#include <algorithm>
#include <ctime>

#include "common/util/base64.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/builtin_schema.h"
#include "tests/apiserver/object_rules.h"
#include "tests/apiserver/priority.h"
#include "tests/support/openapi_schema.h"

namespace torus::standin {

namespace {

std::string encode_continue(int64_t rv, const std::string& start) {
  return base64_encode(json{{"rv", rv}, {"start", start}}.dump());
}

std::pair<int64_t, std::string> decode_continue(const std::string& token) {
  try {
    std::optional<std::string> text = base64_decode(token);
    if (!text) throw bad_request("continue key is not valid: " + token);
    json decoded = json::parse(*text);
    return {decoded.at("rv").get<int64_t>(), decoded.at("start").get<std::string>()};
  } catch (const json::exception&) {
    throw bad_request("continue key is not valid: " + token);
  }
}

}  // namespace

const char* event_type_name(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "ERROR";
}

std::string now_rfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string object_key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::string name_of(const json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return "";
  return object["metadata"].value("name", "");
}

std::string namespace_of(const json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return "";
  return object["metadata"].value("namespace", "");
}

int64_t resource_version_of(const json& object) {
  if (!object.contains("metadata") || !object["metadata"].is_object()) return 0;
  std::string rv = object["metadata"].value("resourceVersion", "");
  if (rv.empty() || rv.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoll(rv);
}

// ---------------------------------------------------------------------------------------------------------------
// Store

Store::Store(StoreOptions options) : options_(options) {
  const ResourceType& ns_type = *registry_.find("", "v1", "namespaces");
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    create(ns_type, "", json{{"metadata", {{"name", name}}}});
  }
  const ResourceType& priority_class = *registry_.find("scheduling.k8s.io", "v1", "priorityclasses");
  for (json& system_class : system_priority_classes()) create(priority_class, "", std::move(system_class));
}

Store::~Store() { close(); }

ObjectPtr Store::as_version(const ObjectPtr& object, const ResourceType& type) {
  if (!object || object->value("apiVersion", "") == type.api_version()) return object;
  auto copy = std::make_shared<json>(*object);
  (*copy)["apiVersion"] = type.api_version();
  return copy;
}

int64_t Store::resource_version() const {
  std::lock_guard lock(mutex_);
  return rv_;
}

void Store::compact() {
  std::lock_guard lock(mutex_);
  history_.clear();
  compacted_rv_ = rv_;
  changed_.notify_all();
}

void Store::drop_watches() {
  std::lock_guard lock(mutex_);
  ++drop_epoch_;
  changed_.notify_all();
}

void Store::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

void Store::set_pod_deletion(PodDeletion mode) {
  std::lock_guard lock(mutex_);
  pod_deletion_ = mode;
}

ObjectPtr Store::find_locked(const std::string& group_resource, const std::string& key) const {
  auto objects = objects_.find(group_resource);
  if (objects == objects_.end()) return nullptr;
  auto it = objects->second.find(key);
  return it == objects->second.end() ? nullptr : it->second;
}

ObjectPtr Store::require_locked(const ResourceType& type, const std::string& ns, const std::string& name) const {
  ObjectPtr object = find_locked(type.group_resource(), object_key(type.namespaced() ? ns : "", name));
  if (!object) throw not_found(type.group_resource(), type.group, name);
  return object;
}

void Store::check_namespace_locked(const ResourceType& type, const std::string& ns) const {
  if (!type.namespaced()) return;
  ObjectPtr namespace_object = find_locked("namespaces", object_key("", ns));
  if (!namespace_object) throw not_found("namespaces", "", ns);
  if (being_deleted(*namespace_object)) {
    throw ApiError(403, "Forbidden",
                   type.plural + " is forbidden: unable to create new content in namespace " + ns +
                       " because it is being terminated",
                   StatusDetails{"", type.group, type.plural, {}, 0});
  }
}

void Store::record_locked(int64_t rv, EventType type, const std::string& group_resource, ObjectPtr object,
                          ObjectPtr previous) {
  history_.push_back(HistoryEvent{rv, type, group_resource, std::move(object), std::move(previous)});
  while (history_.size() > options_.history_limit) {
    compacted_rv_ = history_.front().rv;
    history_.pop_front();
  }
  changed_.notify_all();
}

ObjectPtr Store::commit_locked(const std::string& group_resource, const std::string& key, json object, EventType type,
                               ObjectPtr previous) {
  int64_t rv = ++rv_;
  meta(object)["resourceVersion"] = std::to_string(rv);
  auto stored = std::make_shared<const json>(std::move(object));
  objects_[group_resource][key] = stored;
  by_uid_[(*stored)["metadata"].value("uid", "")] = {group_resource, key};
  record_locked(rv, type, group_resource, stored, std::move(previous));
  return stored;
}

void Store::erase_locked(const std::string& group_resource, const std::string& key, const ObjectPtr& last) {
  json final_state = *last;
  int64_t rv = ++rv_;
  meta(final_state)["resourceVersion"] = std::to_string(rv);
  objects_[group_resource].erase(key);
  by_uid_.erase(final_state["metadata"].value("uid", ""));
  record_locked(rv, EventType::kDeleted, group_resource, std::make_shared<const json>(std::move(final_state)), last);
}

void Store::admit_custom(const ResourceType& type, json& object, const WriteOptions& options,
                         std::vector<std::string>& warnings) const {
  if (type.origin != Origin::kCustom) return admit_builtin(type, object, options, warnings);
  if (!type.schema) return;
  const json& schema = *type.schema;
  openapi::ValidateOptions report;
  report.unknown_fields = openapi::UnknownFields::kReport;
  std::vector<std::string> unknown;
  for (const openapi::SchemaError& e : openapi::validate(schema, object, report)) {
    if (e.kind == openapi::ErrorKind::kUnknownField) unknown.push_back(e.path);
  }
  if (!unknown.empty() && options.validation == FieldValidation::kStrict) {
    std::string message = type.kind + " in version \"" + type.version + "\" cannot be handled as a " + type.kind +
                          ": strict decoding error: ";
    for (size_t i = 0; i < unknown.size(); ++i) message += (i ? ", " : "") + ("unknown field \"" + unknown[i] + "\"");
    throw bad_request(message);
  }
  if (options.validation == FieldValidation::kWarn) {
    for (const std::string& path : unknown) warnings.push_back("unknown field \"" + path + "\"");
  }
  object = openapi::apply_defaults(schema, openapi::prune_unknown_fields(schema, object));
  openapi::ValidateOptions prune;
  prune.unknown_fields = openapi::UnknownFields::kPrune;
  std::vector<Cause> causes;
  for (const openapi::SchemaError& e : openapi::validate(schema, object, prune)) {
    std::string type_name = e.kind == openapi::ErrorKind::kRequired ? "FieldValueRequired" : "FieldValueInvalid";
    causes.push_back({type_name, e.message, e.path});
  }
  if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name_of(object), causes);
}

// Built-in kinds decoded as the apiserver decodes them into its Go types (builtin_schema.h): a mistyped field is
// refused whatever the field validation; unknown fields are refused (Strict), warned of (Warn) and dropped.
void Store::admit_builtin(const ResourceType& type, json& object, const WriteOptions& options,
                          std::vector<std::string>& warnings) const {
  const FieldProblems problems = check_builtin_fields(type.api_version(), type.kind, object);
  const std::string prefix =
      type.kind + " in version \"" + type.version + "\" cannot be handled as a " + type.kind + ": ";
  if (!problems.mistyped.empty()) throw bad_request(prefix + problems.mistyped);
  if (!problems.unknown.empty() && options.validation == FieldValidation::kStrict) {
    std::string message = prefix + "strict decoding error: ";
    for (size_t i = 0; i < problems.unknown.size(); ++i) {
      message += (i ? ", " : "") + ("unknown field \"" + problems.unknown[i] + "\"");
    }
    throw bad_request(message);
  }
  if (options.validation == FieldValidation::kWarn) {
    for (const std::string& path : problems.unknown) warnings.push_back("unknown field \"" + path + "\"");
  }
}

WriteResult Store::create(const ResourceType& type, const std::string& ns, json object, const WriteOptions& options) {
  std::lock_guard lock(mutex_);
  return create_locked(type, ns, std::move(object), options);
}

WriteResult Store::create_locked(const ResourceType& type, const std::string& ns, json object,
                                 const WriteOptions& options) {
  if (!object.is_object()) throw bad_request("the body of the request must be a JSON object");
  std::string api_version = object.value("apiVersion", type.api_version());
  std::string kind = object.value("kind", type.kind);
  if (api_version != type.api_version()) {
    throw bad_request("the API version in the data (" + api_version + ") does not match the expected API version (" +
                      type.api_version() + ")");
  }
  if (kind != type.kind) {
    throw bad_request("the kind in the data (" + kind + ") does not match the expected kind (" + type.kind + ")");
  }
  object["apiVersion"] = type.group.empty() ? type.version : type.group + "/" + type.storage_version;
  object["kind"] = type.kind;
  if (!object.contains("metadata") || !object["metadata"].is_object()) object["metadata"] = json::object();
  json& m = meta(object);
  // ObjectMeta's names are strings: null reads as absent (as Go decodes it) and another type is refused at its field
  // (the apiserver refuses it while decoding), never a json type_error out of value() below.
  for (const char* field : {"name", "generateName", "namespace"}) {
    if (m.contains(field) && m[field].is_null()) m.erase(field);
    if (m.contains(field) && !m[field].is_string()) {
      throw invalid(type.qualified_kind(), type.group, "",
                    {{"FieldValueInvalid", "Invalid value: " + m[field].dump() + ": must be of type string",
                      std::string("metadata.") + field}});
    }
  }
  const bool name_generated = m.value("name", "").empty();
  if (name_generated) {
    std::string prefix = m.value("generateName", "");
    if (prefix.empty()) {
      throw invalid(type.qualified_kind(), type.group, "",
                    {{"FieldValueRequired", "Required value: name or generateName is required", "metadata.name"}});
    }
    m["name"] = prefix + random_suffix();
  }
  std::string name = m["name"].get<std::string>();
  if (auto cause = invalid_name(type, name)) throw invalid(type.qualified_kind(), type.group, name, {*cause});
  if (type.namespaced()) {
    std::string body_ns = m.value("namespace", "");
    if (!body_ns.empty() && body_ns != ns) {
      throw bad_request("the namespace of the provided object does not match the namespace sent on the request");
    }
    m["namespace"] = ns;
  } else {
    m.erase("namespace");
  }
  check_namespace_locked(type, ns);
  std::string key = object_key(type.namespaced() ? ns : "", name);
  if (find_locked(type.group_resource(), key)) throw already_exists(type.group_resource(), type.group, name);

  m["uid"] = random_uid();
  m["creationTimestamp"] = now_rfc3339();
  m.erase("deletionTimestamp");
  m.erase("deletionGracePeriodSeconds");
  m.erase("resourceVersion");
  if (type.generation == Generation::kTracked) {
    m["generation"] = 1;
  } else {
    m.erase("generation");
  }
  if (type.status == StatusSubresource::kPresent && type.origin == Origin::kCustom) object.erase("status");

  std::vector<std::string> warnings;
  std::vector<Cause> causes;
  const std::string gr = type.group_resource();
  if (gr == "pods") {
    causes = validate_pod(object);
    if (causes.empty()) {
      default_pod(object);
      admit_service_account_locked(ns, object);
      admit_priority_locked(object, name_generated ? m.value("generateName", "") : name);
    }
  } else if (gr == "services") {
    json& spec = object["spec"];
    if (!spec.contains("type")) spec["type"] = "ClusterIP";
    if (!spec.contains("clusterIP")) {
      uint32_t n = next_cluster_ip_++;
      spec["clusterIP"] = "10.96." + std::to_string(n / 256 % 256) + "." + std::to_string(n % 256);
    }
    spec["clusterIPs"] = json::array({spec["clusterIP"]});
    if (spec.contains("ports") && spec["ports"].is_array()) {
      for (json& p : spec["ports"]) {
        if (!p.contains("protocol")) p["protocol"] = "TCP";
        if (!p.contains("targetPort") && p.contains("port")) p["targetPort"] = p["port"];
      }
    } else if (spec["clusterIP"] != "None") {
      causes.push_back({"FieldValueRequired", "Required value", "spec.ports"});
    }
    object["status"] = {{"loadBalancer", json::object()}};
  } else if (gr == "secrets") {
    default_secret(object);
    causes = validate_secret(object);
  } else if (gr == "persistentvolumeclaims") {
    causes = validate_claim(object);
    if (causes.empty()) bind_claim(object);
  } else if (gr == "namespaces") {
    object["status"] = {{"phase", "Active"}};
    if (!m.contains("labels")) m["labels"] = json::object();
    m["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (gr == "customresourcedefinitions.apiextensions.k8s.io") {
    causes = validate_crd(object);
  } else if (gr == "priorityclasses.scheduling.k8s.io") {
    default_priority_class(object);
    causes = validate_priority_class(object, nullptr);
  }
  if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name, causes);
  admit_custom(type, object, options, warnings);
  admit_validating_locked(type, ns, object, nullptr, Subresource::kMain, warnings);
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") {
    const json& names = object["spec"]["names"];
    object["status"] = {{"acceptedNames", names},
                        {"conditions",
                         {{{"type", "NamesAccepted"},
                           {"status", "True"},
                           {"reason", "NoConflicts"},
                           {"lastTransitionTime", now_rfc3339()},
                           {"message", "no conflicts found"}},
                          {{"type", "Established"},
                           {"status", "True"},
                           {"reason", "InitialNamesAccepted"},
                           {"lastTransitionTime", now_rfc3339()},
                           {"message", "the initial names have been accepted"}}}},
                        {"storedVersions", json::array()}};
    for (const json& v : object["spec"]["versions"]) {
      if (v.value("storage", false)) object["status"]["storedVersions"].push_back(v["name"]);
    }
  }
  const json preset = meta(object).value("managedFields", json::array());
  own_fields(type, nullptr, object, preset, Subresource::kMain, options);
  if (options.dry_run == DryRun::kAll) {
    return {std::make_shared<const json>(std::move(object)), warnings, WriteKind::kCreated};
  }
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") registry_.register_crd(object);
  ObjectPtr stored = commit_locked(gr, key, std::move(object), EventType::kAdded, nullptr);
  if (gr == "namespaces") create_namespace_defaults_locked(name);
  return {stored, warnings, WriteKind::kCreated};
}

// The ServiceAccount admission plugin: the account must exist; its token is mounted unless automounting is off.
void Store::admit_service_account_locked(const std::string& ns, json& pod) {
  const std::string account = default_service_account(pod);
  ObjectPtr stored = find_locked("serviceaccounts", object_key(ns, account));
  if (!stored) refuse_missing_service_account(pod, ns, account);
  mount_service_account_token(pod, *stored);
}

// What kube-controller-manager's ServiceAccount and root-CA-publisher controllers make in every namespace.
void Store::create_namespace_defaults_locked(const std::string& ns) {
  WriteOptions options;
  options.field_manager = "kube-controller-manager";
  for (json& object : namespace_defaults(ns, options_.root_ca_pem)) {
    const std::string resource = object["kind"] == "ServiceAccount" ? "serviceaccounts" : "configmaps";
    create_locked(*registry_.find("", "v1", resource), ns, std::move(object), options);
  }
}

ObjectPtr Store::get(const ResourceType& type, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mutex_);
  return as_version(require_locked(type, ns, name), type);
}

ListResult Store::list(const ResourceType& type, const std::string& ns, const ListOptions& options) const {
  std::lock_guard lock(mutex_);
  ListResult result;
  result.resource_version = rv_;
  std::string start;
  if (!options.continue_token.empty()) {
    auto [token_rv, token_start] = decode_continue(options.continue_token);
    if (token_rv < compacted_rv_) {
      throw gone(
          "The provided continue parameter is too old to display a consistent list result. You can start a "
          "new list without the continue parameter.");
    }
    start = token_start;
  }
  auto objects = objects_.find(type.group_resource());
  if (objects == objects_.end()) return result;
  std::string prefix = type.namespaced() && !ns.empty() ? ns + "/" : "";
  auto it = start.empty() ? objects->second.lower_bound(prefix) : objects->second.upper_bound(start);
  for (; it != objects->second.end(); ++it) {
    if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
    const json& object = *it->second;
    if (!options.labels.matches(object["metadata"].value("labels", json()))) continue;
    if (!options.fields.matches(object)) continue;
    if (options.limit > 0 && static_cast<int64_t>(result.items.size()) == options.limit) {
      result.continue_token = encode_continue(
          rv_,
          result.items.empty() ? start : object_key(namespace_of(*result.items.back()), name_of(*result.items.back())));
      for (; it != objects->second.end(); ++it) {
        if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
        ++result.remaining;
      }
      break;
    }
    result.items.push_back(as_version(it->second, type));
  }
  return result;
}

WriteResult Store::update(const ResourceType& type, const std::string& ns, const std::string& name, json object,
                          Subresource subresource, const WriteOptions& options) {
  std::lock_guard lock(mutex_);
  // Custom resources refuse unconditional updates, built-in types allow them (AllowUnconditionalUpdate).
  bool require_rv = type.origin == Origin::kCustom;
  return update_locked(type, ns, name, std::move(object), subresource, options, require_rv);
}

WriteResult Store::update_locked(const ResourceType& type, const std::string& ns, const std::string& name, json object,
                                 Subresource subresource, const WriteOptions& options, bool require_resource_version) {
  if (!object.is_object()) throw bad_request("the body of the request must be a JSON object");
  ObjectPtr old = require_locked(type, ns, name);
  const json preset = object.value("metadata", json::object()).value("managedFields", json::array());
  const std::string gr = type.group_resource();
  if (!object.contains("metadata") || !object["metadata"].is_object()) object["metadata"] = json::object();
  json& m = meta(object);
  std::string body_name = m.value("name", "");
  if (body_name != name) {
    throw bad_request("the name of the object (" + body_name + ") does not match the name on the URL (" + name + ")");
  }
  if (type.namespaced() && !m.value("namespace", "").empty() && m.value("namespace", "") != ns) {
    throw bad_request("the namespace of the provided object does not match the namespace sent on the request");
  }
  std::string rv = m.value("resourceVersion", "");
  if (rv.empty() && require_resource_version) {
    throw invalid(
        type.qualified_kind(), type.group, name,
        {{"FieldValueInvalid", "Invalid value: 0x0: must be specified for an update", "metadata.resourceVersion"}});
  }
  if (!rv.empty() && rv != (*old)["metadata"].value("resourceVersion", "")) throw conflict(gr, type.group, name);

  const json& before = *old;
  json after;
  if (subresource == Subresource::kStatus) {
    after = before;  // the status endpoint changes status only
    if (object.contains("status")) {
      after["status"] = object["status"];
    } else {
      after.erase("status");
    }
  } else {
    after = std::move(object);
    if (type.status == StatusSubresource::kPresent) {  // the main endpoint ignores status
      if (before.contains("status")) {
        after["status"] = before["status"];
      } else {
        after.erase("status");
      }
    }
    // Server-owned metadata cannot be changed by clients.
    json& am = meta(after);
    for (const char* field : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                              "generation", "generateName"}) {
      if (before["metadata"].contains(field)) {
        am[field] = before["metadata"][field];
      } else {
        am.erase(field);
      }
    }
  }
  after["apiVersion"] = before["apiVersion"];
  after["kind"] = type.kind;
  meta(after)["namespace"] = before["metadata"].value("namespace", "");
  if (!type.namespaced()) meta(after).erase("namespace");
  meta(after)["resourceVersion"] = before["metadata"].value("resourceVersion", "");

  std::vector<std::string> warnings;
  if (gr == "pods" && subresource == Subresource::kMain) {
    keep_pod_priority(before, after);
    if (auto cause = forbidden_pod_update(before, after)) throw invalid(type.qualified_kind(), "", name, {*cause});
  }
  if (gr == "secrets") default_secret(after);
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") {
    std::vector<Cause> causes = validate_crd(after);
    if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name, causes);
  }
  if (gr == "priorityclasses.scheduling.k8s.io") {
    default_priority_class(after);
    std::vector<Cause> causes = validate_priority_class(after, &before);
    if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name, causes);
  }
  admit_custom(type, after, options, warnings);
  admit_validating_locked(type, ns, after, &before, subresource, warnings);
  if (being_deleted(before)) {
    const json empty = json::array();
    const json& old_list = before["metadata"].value("finalizers", empty);
    for (const json& f : after["metadata"].value("finalizers", empty)) {
      if (std::find(old_list.begin(), old_list.end(), f) == old_list.end()) {
        throw invalid(
            type.qualified_kind(), type.group, name,
            {{"FieldValueForbidden", "Forbidden: no new finalizers can be added if the object is being deleted",
              "metadata.finalizers"}});
      }
    }
  }
  if (type.generation == Generation::kTracked && spec_part(before) != spec_part(after)) {
    meta(after)["generation"] = before["metadata"].value("generation", 1) + 1;
  }
  own_fields(type, &before, after, preset, subresource, options);
  if (after == before) return {old, warnings};  // a no-op write keeps the resourceVersion, as the apiserver does
  if (options.dry_run == DryRun::kAll) return {std::make_shared<const json>(std::move(after)), warnings};
  std::string key = object_key(type.namespaced() ? ns : "", name);
  if (being_deleted(after) && !has_finalizers(after)) {
    erase_locked(gr, key, std::make_shared<const json>(after));
    finish_deletion_locked(gr, key);
    collect_garbage_locked();
    return {std::make_shared<const json>(std::move(after)), warnings};
  }
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") registry_.register_crd(after);
  ObjectPtr stored = commit_locked(gr, key, std::move(after), EventType::kModified, old);
  if (being_deleted(*stored)) collect_garbage_locked();
  return {stored, warnings};
}

WriteResult Store::patch(const ResourceType& type, const std::string& ns, const std::string& name, PatchType patch_type,
                         const json& patch, Subresource subresource, const WriteOptions& options) {
  if (patch_type == PatchType::kStrategicMerge && type.origin == Origin::kCustom) {
    throw unsupported_media_type(
        "application/strategic-merge-patch+json (strategic merge patch format is not "
        "supported for custom resources)");
  }
  std::lock_guard lock(mutex_);
  ObjectPtr old = require_locked(type, ns, name);
  json patched = apply_patch(patch_type, *as_version(old, type), patch);
  // A resourceVersion in the patch is a precondition; otherwise the patch applies to the current version.
  if (!patched.contains("metadata") || !patched["metadata"].is_object()) patched["metadata"] = json::object();
  bool patch_names_rv = patch.is_object() && patch.contains("metadata") && patch["metadata"].is_object() &&
                        patch["metadata"].contains("resourceVersion");
  if (!patch_names_rv) patched["metadata"]["resourceVersion"] = (*old)["metadata"].value("resourceVersion", "");
  return update_locked(type, ns, name, std::move(patched), subresource, options, false);
}

ObjectPtr Store::bind(const std::string& ns, const std::string& pod, const std::string& node) {
  std::lock_guard lock(mutex_);
  const ResourceType& type = *registry_.find("", "v1", "pods");
  ObjectPtr old = require_locked(type, ns, pod);
  if (!(*old)["spec"].value("nodeName", "").empty()) {
    throw conflict("pods/binding", "", pod);
  }
  json after = *old;
  after["spec"]["nodeName"] = node;
  return commit_locked("pods", object_key(ns, pod), std::move(after), EventType::kModified, old);
}

}  // namespace torus::standin

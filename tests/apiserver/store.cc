#include "tests/apiserver/store.h"

#include <algorithm>
#include <ctime>
#include <random>

#include "common/util/base64.h"
#include "tests/apiserver/api_error.h"
#include "tests/support/openapi_schema.h"

namespace torus::standin {

namespace {

std::string random_uid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng();
  uint64_t b = rng();
  char text[40];
  std::snprintf(text, sizeof(text), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return text;
}

std::string random_suffix() {
  thread_local std::mt19937 rng{std::random_device{}()};
  // The apiserver's generateName alphabet: no vowels, no confusable characters.
  static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (int i = 0; i < 5; ++i) out += alphabet[rng() % (sizeof(alphabet) - 1)];
  return out;
}

bool is_dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return s.front() != '-' && s.back() != '-';
}

bool is_dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!is_dns_label(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Services and namespaces need a DNS label (no dots); everything else a DNS subdomain.
std::optional<Cause> invalid_name(const ResourceType& type, const std::string& name) {
  bool label_only = type.group.empty() && (type.plural == "services" || type.plural == "namespaces");
  if (label_only ? is_dns_label(name) : is_dns_subdomain(name)) return std::nullopt;
  std::string message =
      label_only ? "Invalid value: \"" + name +
                       "\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                       "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                       "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                 : "Invalid value: \"" + name +
                       "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                       "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
  return Cause{"FieldValueInvalid", message, "metadata.name"};
}

bool has_finalizers(const json& object) {
  const json& meta = object["metadata"];
  return meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
}

bool being_deleted(const json& object) { return object["metadata"].contains("deletionTimestamp"); }

void remove_finalizer(json& object, const std::string& finalizer) {
  json& list = object["metadata"]["finalizers"];
  list.erase(std::remove(list.begin(), list.end(), json(finalizer)), list.end());
  if (list.empty()) object["metadata"].erase("finalizers");
}

bool has_finalizer(const json& object, const std::string& finalizer) {
  const json& meta = object["metadata"];
  if (!meta.contains("finalizers")) return false;
  const json& list = meta["finalizers"];
  return std::find(list.begin(), list.end(), json(finalizer)) != list.end();
}

// Everything but metadata and status: what metadata.generation counts changes of.
json spec_part(const json& object) {
  json out = object;
  out.erase("metadata");
  out.erase("status");
  return out;
}

void default_pod(json& pod) {
  json& spec = pod["spec"];
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
  if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
  if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (json& c : spec["containers"]) {
      if (c.is_object() && !c.contains("imagePullPolicy")) {
        std::string image = c.value("image", "");
        bool latest = image.find(':') == std::string::npos || image.ends_with(":latest");
        c["imagePullPolicy"] = latest ? "Always" : "IfNotPresent";
      }
    }
  }
  pod["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
}

std::vector<Cause> validate_pod(const json& pod) {
  std::vector<Cause> causes;
  const json& spec = pod.value("spec", json::object());
  if (!spec.contains("containers") || !spec["containers"].is_array() || spec["containers"].empty()) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.containers"});
    return causes;
  }
  for (size_t i = 0; i < spec["containers"].size(); ++i) {
    const json& c = spec["containers"][i];
    std::string field = "spec.containers[" + std::to_string(i) + "]";
    if (!c.is_object() || c.value("name", "").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".name"});
    }
    if (!c.is_object() || c.value("image", "").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".image"});
    }
  }
  std::string policy = spec.value("restartPolicy", "Always");
  if (policy != "Always" && policy != "OnFailure" && policy != "Never") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: \"" + policy + "\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                      "spec.restartPolicy"});
  }
  return causes;
}

// Pod specs are immutable but for a few fields (containers' images, activeDeadlineSeconds, added tolerations).
std::optional<Cause> forbidden_pod_update(const json& before, const json& after) {
  json a = before.value("spec", json::object());
  json b = after.value("spec", json::object());
  for (json* spec : {&a, &b}) {
    for (const char* list : {"containers", "initContainers"}) {
      if (spec->contains(list)) {
        for (json& c : (*spec)[list]) c.erase("image");
      }
    }
    spec->erase("activeDeadlineSeconds");
    spec->erase("tolerations");
    spec->erase("terminationGracePeriodSeconds");
  }
  if (a == b) return std::nullopt;
  return Cause{"FieldValueForbidden",
               "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
               "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
               "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
               "previously negative)",
               "spec"};
}

void default_secret(json& secret) {
  if (!secret.contains("type")) secret["type"] = "Opaque";
  if (secret.contains("stringData") && secret["stringData"].is_object()) {
    for (auto it = secret["stringData"].begin(); it != secret["stringData"].end(); ++it) {
      if (it.value().is_string()) secret["data"][it.key()] = base64_encode(it.value().get<std::string>());
    }
    secret.erase("stringData");
  }
}

std::vector<Cause> validate_secret(const json& secret) {
  std::vector<Cause> causes;
  if (!secret.contains("data") || !secret["data"].is_object()) return causes;
  for (auto it = secret["data"].begin(); it != secret["data"].end(); ++it) {
    const json& v = it.value();
    std::string text = v.is_string() ? v.get<std::string>() : "";
    const std::optional<std::string> decoded = v.is_string() ? base64_decode(text) : std::nullopt;
    if (!decoded || base64_encode(*decoded) != text) {  // canonical base64 only, as the apiserver decodes it
      causes.push_back({"FieldValueInvalid", "Invalid value: illegal base64 data", "data[" + it.key() + "]"});
    }
  }
  return causes;
}

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

json& meta(json& object) { return object["metadata"]; }

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
  if (type.origin != Origin::kCustom || !type.schema) return;
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
  if (m.value("name", "").empty()) {
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
    if (causes.empty()) default_pod(object);
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
  } else if (gr == "namespaces") {
    object["status"] = {{"phase", "Active"}};
    if (!m.contains("labels")) m["labels"] = json::object();
    m["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (gr == "customresourcedefinitions.apiextensions.k8s.io") {
    causes = validate_crd(object);
  }
  if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name, causes);
  admit_custom(type, object, options, warnings);
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
  if (options.dry_run == DryRun::kAll) return {std::make_shared<const json>(std::move(object)), warnings};
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") registry_.register_crd(object);
  return {commit_locked(gr, key, std::move(object), EventType::kAdded, nullptr), warnings};
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
    if (auto cause = forbidden_pod_update(before, after)) throw invalid(type.qualified_kind(), "", name, {*cause});
  }
  if (gr == "secrets") default_secret(after);
  if (gr == "customresourcedefinitions.apiextensions.k8s.io") {
    std::vector<Cause> causes = validate_crd(after);
    if (!causes.empty()) throw invalid(type.qualified_kind(), type.group, name, causes);
  }
  admit_custom(type, after, options, warnings);
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

DeleteResult Store::remove(const ResourceType& type, const std::string& ns, const std::string& name,
                           const DeleteOptions& options) {
  std::lock_guard lock(mutex_);
  return remove_locked(type, ns, name, options);
}

std::vector<ObjectPtr> Store::remove_collection(const ResourceType& type, const std::string& ns,
                                                const ListOptions& selection, const DeleteOptions& options) {
  ListOptions all = selection;
  all.limit = 0;
  all.continue_token.clear();
  std::lock_guard lock(mutex_);
  std::vector<ObjectPtr> removed;
  auto objects = objects_.find(type.group_resource());
  if (objects == objects_.end()) return removed;
  std::vector<std::pair<std::string, std::string>> targets;
  for (const auto& [key, object] : objects->second) {
    if (type.namespaced() && !ns.empty() && namespace_of(*object) != ns) continue;
    if (!all.labels.matches((*object)["metadata"].value("labels", json())) || !all.fields.matches(*object)) continue;
    targets.emplace_back(namespace_of(*object), name_of(*object));
  }
  for (const auto& [object_ns, object_name] : targets) {
    removed.push_back(remove_locked(type, object_ns, object_name, options).object);
  }
  return removed;
}

DeleteResult Store::remove_locked(const ResourceType& type, const std::string& ns, const std::string& name,
                                  const DeleteOptions& options) {
  ObjectPtr old = require_locked(type, ns, name);
  const std::string gr = type.group_resource();
  const json& m = (*old)["metadata"];
  if (!options.precondition_uid.empty() && options.precondition_uid != m.value("uid", "")) {
    throw ApiError(409, "Conflict",
                   "Precondition failed: UID in precondition: " + options.precondition_uid +
                       ", UID in object meta: " + m.value("uid", ""),
                   StatusDetails{name, type.group, type.plural, {}, 0});
  }
  if (!options.precondition_resource_version.empty() &&
      options.precondition_resource_version != m.value("resourceVersion", "")) {
    throw ApiError(409, "Conflict",
                   "Precondition failed: ResourceVersion in precondition: " + options.precondition_resource_version +
                       ", ResourceVersion in object meta: " + m.value("resourceVersion", ""),
                   StatusDetails{name, type.group, type.plural, {}, 0});
  }
  if (options.dry_run == DryRun::kAll) return {as_version(old, type), DeleteResult::State::kGone};
  std::string key = object_key(type.namespaced() ? ns : "", name);
  json after = *old;
  bool changed = false;
  // Graceful pod deletion: a pod running on a node is marked, and the kubelet stops it and removes it.
  if (gr == "pods" && pod_deletion_ == PodDeletion::kGraceful && !being_deleted(after)) {
    std::string phase = after["status"].value("phase", "");
    int64_t grace = options.grace_period_seconds.value_or(after["spec"].value("terminationGracePeriodSeconds", 30));
    if (!after["spec"].value("nodeName", "").empty() && grace > 0 && phase != "Succeeded" && phase != "Failed") {
      meta(after)["deletionTimestamp"] = now_rfc3339();
      meta(after)["deletionGracePeriodSeconds"] = grace;
      changed = true;
    }
  }
  if (gr == "namespaces" && !being_deleted(after)) {
    meta(after)["deletionTimestamp"] = now_rfc3339();
    meta(after)["deletionGracePeriodSeconds"] = 0;
    after["status"]["phase"] = "Terminating";
    changed = true;
  }
  if (options.propagation == Propagation::kForeground && !has_finalizer(after, "foregroundDeletion")) {
    meta(after)["finalizers"].push_back("foregroundDeletion");
    changed = true;
  } else if (options.propagation == Propagation::kOrphan && !has_finalizer(after, "orphan")) {
    meta(after)["finalizers"].push_back("orphan");
    changed = true;
  }
  if (has_finalizers(after) || changed) {
    if (!being_deleted(after)) {
      meta(after)["deletionTimestamp"] = now_rfc3339();
      meta(after)["deletionGracePeriodSeconds"] = 0;
    }
    if (after == *old) return {as_version(old, type), DeleteResult::State::kPending};
    ObjectPtr stored = commit_locked(gr, key, std::move(after), EventType::kModified, old);
    collect_garbage_locked();
    ObjectPtr now = find_locked(gr, key);
    if (!now) return {as_version(stored, type), DeleteResult::State::kGone};
    return {as_version(now, type), DeleteResult::State::kPending};
  }
  erase_locked(gr, key, old);
  finish_deletion_locked(gr, key);
  collect_garbage_locked();
  return {as_version(old, type), DeleteResult::State::kGone};
}

void Store::finish_deletion_locked(const std::string& group_resource, const std::string& key) {
  // Deleting a CRD deletes its custom resources (their finalizers are not waited for) and unregisters it.
  if (group_resource != "customresourcedefinitions.apiextensions.k8s.io") return;
  std::string crd_name = key.substr(1);
  ResourcePtr custom;
  for (const ResourcePtr& t : registry_.all()) {
    if (t->origin == Origin::kCustom && t->group_resource() == crd_name) custom = t;
  }
  if (custom) {
    Objects doomed = objects_[crd_name];
    for (const auto& [k, object] : doomed) erase_locked(crd_name, k, object);
  }
  objects_.erase(crd_name);
  registry_.unregister_crd(crd_name);
}

bool Store::owner_exists_locked(const std::string& uid) const { return by_uid_.count(uid) > 0; }

void Store::delete_object_locked(const std::string& group_resource, const std::string& key, Propagation propagation) {
  ObjectPtr object = find_locked(group_resource, key);
  ResourcePtr type = registry_.find_group_resource(group_resource);
  if (!object || !type) return;
  DeleteOptions options;
  options.propagation = propagation;
  remove_locked(*type, namespace_of(*object), name_of(*object), options);
}

// Runs until nothing changes: dependents whose owners are all gone are deleted (background) or, with a surviving
// owner, lose the dead reference; owners deleted in the foreground wait for their dependents; orphaning owners
// strip their references from dependents; terminating namespaces go once empty.
void Store::collect_garbage_locked() {
  bool progress = true;
  while (progress) {
    progress = false;
    std::map<std::string, int> live_dependents;  // owner uid -> dependents still present
    std::vector<std::tuple<std::string, std::string, json>> rewrites;
    std::vector<std::pair<std::string, std::string>> doomed;
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_owner;
    for (const auto& [gr, objects] : objects_) {
      for (const auto& [key, object] : objects) {
        const json& m = (*object)["metadata"];
        if (!m.contains("ownerReferences") || !m["ownerReferences"].is_array()) continue;
        json kept = json::array();
        for (const json& ref : m["ownerReferences"]) {
          std::string uid = ref.value("uid", "");
          if (owner_exists_locked(uid)) {
            kept.push_back(ref);
            ++live_dependents[uid];
            by_owner[uid].emplace_back(gr, key);
          }
        }
        if (kept.size() == m["ownerReferences"].size() || being_deleted(*object)) continue;
        if (kept.empty()) {
          doomed.emplace_back(gr, key);
        } else {
          rewrites.emplace_back(gr, key, kept);
        }
      }
    }
    for (const auto& [gr, key, kept] : rewrites) {
      ObjectPtr old = find_locked(gr, key);
      json after = *old;
      after["metadata"]["ownerReferences"] = kept;
      commit_locked(gr, key, std::move(after), EventType::kModified, old);
      progress = true;
    }
    for (const auto& [gr, key] : doomed) {
      delete_object_locked(gr, key, Propagation::kBackground);
      progress = true;
    }
    if (progress) continue;
    // Owners waiting on the GC's finalizers.
    std::vector<std::pair<std::string, std::string>> finishing;
    for (const auto& [gr, objects] : objects_) {
      for (const auto& [key, object] : objects) {
        if (!being_deleted(*object)) continue;
        std::string uid = (*object)["metadata"].value("uid", "");
        if (has_finalizer(*object, "foregroundDeletion")) {
          for (const auto& [dgr, dkey] : by_owner[uid]) {
            ObjectPtr dependent = find_locked(dgr, dkey);
            if (dependent && !being_deleted(*dependent)) doomed.emplace_back(dgr, dkey);
          }
          if (live_dependents[uid] == 0) finishing.emplace_back(gr, key);
        } else if (has_finalizer(*object, "orphan")) {
          for (const auto& [dgr, dkey] : by_owner[uid]) {
            ObjectPtr old = find_locked(dgr, dkey);
            json after = *old;
            json kept = json::array();
            for (const json& ref : after["metadata"]["ownerReferences"]) {
              if (ref.value("uid", "") != uid) kept.push_back(ref);
            }
            if (kept.empty()) {
              after["metadata"].erase("ownerReferences");
            } else {
              after["metadata"]["ownerReferences"] = kept;
            }
            rewrites.emplace_back(dgr, dkey, after);
          }
          finishing.emplace_back(gr, key);
        } else if (gr == "namespaces") {
          std::string ns = name_of(*object);
          bool empty = true;
          for (const auto& [cgr, cobjects] : objects_) {
            for (const auto& [ckey, cobject] : cobjects) {
              if (namespace_of(*cobject) == ns) {
                empty = false;
                if (!being_deleted(*cobject)) doomed.emplace_back(cgr, ckey);
              }
            }
          }
          if (empty) finishing.emplace_back(gr, key);
        }
      }
    }
    for (const auto& [gr, key, after] : rewrites) {
      ObjectPtr old = find_locked(gr, key);
      commit_locked(gr, key, after, EventType::kModified, old);
      progress = true;
    }
    for (const auto& [gr, key] : doomed) {
      if (find_locked(gr, key)) {
        delete_object_locked(gr, key, Propagation::kBackground);
        progress = true;
      }
    }
    for (const auto& [gr, key] : finishing) {
      ObjectPtr old = find_locked(gr, key);
      if (!old) continue;
      json after = *old;
      if (has_finalizer(after, "foregroundDeletion")) remove_finalizer(after, "foregroundDeletion");
      if (has_finalizer(after, "orphan")) remove_finalizer(after, "orphan");
      if (has_finalizers(after)) {
        if (after != *old) commit_locked(gr, key, std::move(after), EventType::kModified, old);
      } else {
        erase_locked(gr, key, std::make_shared<const json>(std::move(after)));
        finish_deletion_locked(gr, key);
      }
      progress = true;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Watches

std::unique_ptr<WatchStream> Store::watch(const WatchRequest& request) {
  std::unique_ptr<WatchStream> stream(
      new WatchStream(*this, request.type, request.ns, request.labels, request.fields, request.bookmarks));
  std::lock_guard lock(mutex_);
  stream->epoch_ = drop_epoch_;
  int64_t from = request.resource_version.value_or(0);
  if (from == 0) {
    // "Start at most recent": the current state as synthetic ADDED events, then live ones.
    auto objects = objects_.find(stream->group_resource_);
    if (objects != objects_.end()) {
      for (const auto& [key, object] : objects->second) {
        if (!stream->namespace_.empty() && namespace_of(*object) != stream->namespace_) continue;
        if (!stream->labels_.matches((*object)["metadata"].value("labels", json()))) continue;
        if (!stream->fields_.matches(*object)) continue;
        stream->initial_.push_back({"ADDED", as_version(object, *request.type)});
      }
    }
    stream->cursor_ = rv_;
    return stream;
  }
  if (from < compacted_rv_) {
    throw gone("too old resource version: " + std::to_string(from) + " (" + std::to_string(compacted_rv_) + ")");
  }
  stream->cursor_ = std::min(from, rv_);
  return stream;
}

WatchStream::WatchStream(Store& store, ResourcePtr type, std::string ns, LabelSelector labels, FieldSelector fields,
                         bool bookmarks)
    : store_(store),
      type_(std::move(type)),
      group_resource_(type_->group_resource()),
      namespace_(std::move(ns)),
      labels_(std::move(labels)),
      fields_(std::move(fields)),
      bookmarks_(bookmarks),
      next_bookmark_(std::chrono::steady_clock::now() + store.options_.bookmark_interval) {}

WatchStream::~WatchStream() = default;

void WatchStream::cancel() {
  std::lock_guard lock(store_.mutex_);
  cancelled_ = true;
  store_.changed_.notify_all();
}

WatchStream::Outcome WatchStream::next(std::chrono::steady_clock::time_point deadline, std::vector<WatchEvent>& out) {
  out.clear();
  if (!initial_.empty()) {
    out.swap(initial_);
    return Outcome::kEvents;
  }
  std::unique_lock lock(store_.mutex_);
  auto in_scope = [&](const json& object) {
    if (!namespace_.empty() && namespace_of(object) != namespace_) return false;
    return labels_.matches(object["metadata"].value("labels", json())) && fields_.matches(object);
  };
  while (true) {
    if (store_.closed_ || cancelled_) return Outcome::kClosed;
    if (store_.drop_epoch_ != epoch_) return Outcome::kDropped;
    if (cursor_ < store_.compacted_rv_ && !(store_.history_.empty() && cursor_ == store_.rv_)) {
      expired_message_ =
          "too old resource version: " + std::to_string(cursor_) + " (" + std::to_string(store_.compacted_rv_) + ")";
      return Outcome::kExpired;
    }
    auto& history = store_.history_;
    auto first = std::upper_bound(history.begin(), history.end(), cursor_,
                                  [](int64_t rv, const Store::HistoryEvent& e) { return rv < e.rv; });
    for (auto it = first; it != history.end(); ++it) {
      cursor_ = it->rv;
      if (it->group_resource != group_resource_) continue;
      bool now_in = in_scope(*it->object);
      bool was_in = it->previous && in_scope(*it->previous);
      if (it->type == EventType::kModified) {
        if (now_in && was_in) {
          out.push_back({"MODIFIED", Store::as_version(it->object, *type_)});
        } else if (now_in) {
          out.push_back({"ADDED", Store::as_version(it->object, *type_)});
        } else if (was_in) {
          out.push_back({"DELETED", Store::as_version(it->object, *type_)});
        }
      } else if (now_in) {
        out.push_back({event_type_name(it->type), Store::as_version(it->object, *type_)});
      }
    }
    cursor_ = std::max(cursor_, store_.rv_);
    if (!out.empty()) return Outcome::kEvents;
    auto now = std::chrono::steady_clock::now();
    if (bookmarks_ && now >= next_bookmark_) {
      next_bookmark_ = now + store_.options_.bookmark_interval;
      json bookmark = {{"kind", type_->kind},
                       {"apiVersion", type_->api_version()},
                       {"metadata", {{"resourceVersion", std::to_string(cursor_)}}}};
      out.push_back({"BOOKMARK", std::make_shared<const json>(std::move(bookmark))});
      return Outcome::kEvents;
    }
    if (now >= deadline) return Outcome::kTimeout;
    auto wake = bookmarks_ ? std::min(deadline, next_bookmark_) : deadline;
    store_.changed_.wait_until(lock, wake);
  }
}

}  // namespace torus::standin

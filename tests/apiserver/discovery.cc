#include "tests/apiserver/discovery.h"

#include <algorithm>
#include <functional>

namespace torus::standin {

namespace {

json verbs_of() {
  return json::array({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"});
}

json resource_entry(const ResourceType& type) {
  json entry = {{"name", type.plural},
                {"singularName", type.singular},
                {"namespaced", type.namespaced()},
                {"kind", type.kind},
                {"verbs", verbs_of()}};
  if (!type.short_names.empty()) entry["shortNames"] = type.short_names;
  if (!type.categories.empty()) entry["categories"] = type.categories;
  if (type.plural == "pods" || type.plural == "services" || type.origin == Origin::kCustom) {
    entry["categories"] = type.categories.empty() ? json::array({"all"}) : json(type.categories);
  }
  entry["storageVersionHash"] = std::to_string(std::hash<std::string>{}(type.group_resource()) % 1000000);
  return entry;
}

json group_entry(const Registry& registry, const std::string& group) {
  json versions = json::array();
  for (const std::string& v : registry.versions_of(group)) {
    versions.push_back({{"groupVersion", group + "/" + v}, {"version", v}});
  }
  if (versions.empty()) return nullptr;
  return {{"name", group}, {"versions", versions}, {"preferredVersion", versions[0]}};
}

std::string schema_name(const ResourceType& type) {
  // The apiserver's definition names reverse the group: torus.dev -> dev.torus.v1.TrainingJob.
  std::string group = type.group;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = group.find('.', start);
    parts.push_back(group.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::reverse(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + ".";
  return out + type.version + "." + type.kind;
}

std::string path_prefix(const std::string& group, const std::string& version) {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

json operation(const ResourceType& type, const std::string& action) {
  json gvk = {{"group", type.group}, {"version", type.version}, {"kind", type.kind}};
  return {{"operationId", action + type.kind},
          {"x-kubernetes-action", action},
          {"x-kubernetes-group-version-kind", gvk},
          {"parameters", json::array({{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                                      {{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}}})},
          {"responses", {{"200", {{"description", "OK"}}}}}};
}

}  // namespace

json version_info() {
  return {{"major", "1"},
          {"minor", "32"},
          {"gitVersion", "v1.32.0-torus-standin"},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2026-01-01T00:00:00Z"},
          {"goVersion", "go1.23"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

json api_versions() {
  return {{"kind", "APIVersions"},
          {"versions", json::array({"v1"})},
          {"serverAddressByClientCIDRs", json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}})}};
}

json api_group_list(const Registry& registry) {
  json groups = json::array();
  std::vector<std::string> seen;
  for (const auto& [group, version] : registry.group_versions()) {
    if (group.empty() || std::find(seen.begin(), seen.end(), group) != seen.end()) continue;
    seen.push_back(group);
    json entry = group_entry(registry, group);
    if (!entry.is_null()) groups.push_back(entry);
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

json api_group(const Registry& registry, const std::string& group) {
  json entry = group_entry(registry, group);
  if (entry.is_null()) return nullptr;
  entry["kind"] = "APIGroup";
  entry["apiVersion"] = "v1";
  return entry;
}

json api_resource_list(const Registry& registry, const std::string& group, const std::string& version) {
  json resources = json::array();
  for (const ResourcePtr& type : registry.all()) {
    if (type->group != group || type->version != version) continue;
    resources.push_back(resource_entry(*type));
    if (type->status == StatusSubresource::kPresent) {
      resources.push_back({{"name", type->plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", type->namespaced()},
                           {"kind", type->kind},
                           {"verbs", json::array({"get", "patch", "update"})}});
    }
    if (group.empty() && type->plural == "pods") {
      resources.push_back({{"name", "pods/binding"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"kind", "Binding"},
                           {"verbs", json::array({"create"})}});
      // The eviction subresource names its group and version, as kube-apiserver's does: `kubectl drain` looks for
      // it here (CheckEvictionSupport) and evicts through policy/v1 instead of deleting.
      resources.push_back({{"name", "pods/eviction"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"group", "policy"},
                           {"version", "v1"},
                           {"kind", "Eviction"},
                           {"verbs", json::array({"create"})}});
    }
  }
  if (resources.empty()) return nullptr;
  std::string gv = group.empty() ? version : group + "/" + version;
  return {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", gv}, {"resources", resources}};
}

json openapi_v3_root(const Registry& registry) {
  json paths = json::object();
  for (const auto& [group, version] : registry.group_versions()) {
    std::string path = path_prefix(group, version).substr(1);
    std::string hash = std::to_string(std::hash<std::string>{}(openapi_v3_document(registry, group, version).dump()));
    paths[path] = {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + hash}};
  }
  return {{"paths", paths}};
}

json openapi_v3_document(const Registry& registry, const std::string& group, const std::string& version) {
  json paths = json::object();
  json schemas = json::object();
  for (const ResourcePtr& type : registry.all()) {
    if (type->group != group || type->version != version) continue;
    std::string base =
        path_prefix(group, version) + (type->namespaced() ? "/namespaces/{namespace}/" : "/") + type->plural;
    paths[base] = {{"post", operation(*type, "post")}};
    paths[base + "/{name}"] = {{"put", operation(*type, "put")}, {"patch", operation(*type, "patch")}};
    if (type->status == StatusSubresource::kPresent) {
      paths[base + "/{name}/status"] = {{"put", operation(*type, "put")}, {"patch", operation(*type, "patch")}};
    }
    if (type->schema) {
      json schema = *type->schema;
      schema["x-kubernetes-group-version-kind"] =
          json::array({{{"group", type->group}, {"version", type->version}, {"kind", type->kind}}});
      schemas[schema_name(*type)] = schema;
    }
  }
  if (paths.empty()) return nullptr;
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

}  // namespace torus::standin

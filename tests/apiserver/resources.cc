#include "tests/apiserver/resources.h"

#include <algorithm>
#include <tuple>

#include "tests/support/openapi_schema.h"

namespace torus::standin {

namespace {

struct BuiltIn {
  const char* group;
  const char* version;
  const char* plural;
  const char* singular;
  const char* kind;
  Scope scope;
  StatusSubresource status;
  Generation generation;
  std::vector<std::string> short_names;
};

// What the operator, kubectl, the kubelet simulation and the Helm chart use.
std::vector<BuiltIn> built_ins() {
  using S = Scope;
  using St = StatusSubresource;
  using G = Generation;
  return {
      {"", "v1", "namespaces", "namespace", "Namespace", S::kCluster, St::kPresent, G::kUntracked, {"ns"}},
      {"", "v1", "nodes", "node", "Node", S::kCluster, St::kPresent, G::kUntracked, {"no"}},
      {"", "v1", "pods", "pod", "Pod", S::kNamespaced, St::kPresent, G::kUntracked, {"po"}},
      {"", "v1", "services", "service", "Service", S::kNamespaced, St::kPresent, G::kUntracked, {"svc"}},
      {"", "v1", "configmaps", "configmap", "ConfigMap", S::kNamespaced, St::kAbsent, G::kUntracked, {"cm"}},
      {"", "v1", "secrets", "secret", "Secret", S::kNamespaced, St::kAbsent, G::kUntracked, {}},
      {"",
       "v1",
       "persistentvolumeclaims",
       "persistentvolumeclaim",
       "PersistentVolumeClaim",
       S::kNamespaced,
       St::kPresent,
       G::kUntracked,
       {"pvc"}},
      {"", "v1", "events", "event", "Event", S::kNamespaced, St::kAbsent, G::kUntracked, {"ev"}},
      {"",
       "v1",
       "serviceaccounts",
       "serviceaccount",
       "ServiceAccount",
       S::kNamespaced,
       St::kAbsent,
       G::kUntracked,
       {"sa"}},
      {"apps", "v1", "deployments", "deployment", "Deployment", S::kNamespaced, St::kPresent, G::kTracked, {"deploy"}},
      {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", S::kNamespaced, St::kPresent, G::kTracked, {"rs"}},
      {"policy",
       "v1",
       "poddisruptionbudgets",
       "poddisruptionbudget",
       "PodDisruptionBudget",
       S::kNamespaced,
       St::kPresent,
       G::kTracked,
       {"pdb"}},
      {"coordination.k8s.io", "v1", "leases", "lease", "Lease", S::kNamespaced, St::kAbsent, G::kUntracked, {}},
      {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", S::kNamespaced, St::kAbsent, G::kUntracked, {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "rolebindings",
       "rolebinding",
       "RoleBinding",
       S::kNamespaced,
       St::kAbsent,
       G::kUntracked,
       {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterroles",
       "clusterrole",
       "ClusterRole",
       S::kCluster,
       St::kAbsent,
       G::kUntracked,
       {}},
      {"rbac.authorization.k8s.io",
       "v1",
       "clusterrolebindings",
       "clusterrolebinding",
       "ClusterRoleBinding",
       S::kCluster,
       St::kAbsent,
       G::kUntracked,
       {}},
      {"scheduling.k8s.io",
       "v1",
       "priorityclasses",
       "priorityclass",
       "PriorityClass",
       S::kCluster,
       St::kAbsent,
       G::kTracked,
       {"pc"}},
      {"apiextensions.k8s.io",
       "v1",
       "customresourcedefinitions",
       "customresourcedefinition",
       "CustomResourceDefinition",
       S::kCluster,
       St::kPresent,
       G::kTracked,
       {"crd", "crds"}},
  };
}

std::string key_text(const std::string& group, const std::string& version, const std::string& plural) {
  return group + "/" + version + "/" + plural;
}

void require_string(const json& object, const char* key, const std::string& field, std::vector<Cause>& causes) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string() ||
      object[key].get<std::string>().empty()) {
    causes.push_back({"FieldValueRequired", "Required value", field});
  }
}

std::vector<std::string> string_list(const json& value) {
  std::vector<std::string> out;
  if (!value.is_array()) return out;
  for (const json& item : value) {
    if (item.is_string()) out.push_back(item.get<std::string>());
  }
  return out;
}

void check_versions(const json& spec, std::vector<Cause>& causes) {
  if (!spec.contains("versions") || !spec["versions"].is_array() || spec["versions"].empty()) {
    causes.push_back({"FieldValueRequired", "Required value: must have at least one version", "spec.versions"});
    return;
  }
  int storage = 0;
  for (size_t i = 0; i < spec["versions"].size(); ++i) {
    const json& v = spec["versions"][i];
    std::string field = "spec.versions[" + std::to_string(i) + "]";
    require_string(v, "name", field + ".name", causes);
    if (v.value("storage", false)) ++storage;
    const json* schema = nullptr;
    if (v.contains("schema") && v["schema"].contains("openAPIV3Schema")) schema = &v["schema"]["openAPIV3Schema"];
    if (schema == nullptr) {
      causes.push_back(
          {"FieldValueRequired", "Required value: schemas are required", field + ".schema.openAPIV3Schema"});
      continue;
    }
    for (const std::string& why : openapi::structural_errors(*schema)) {
      causes.push_back({"FieldValueInvalid", why, field + ".schema.openAPIV3Schema"});
    }
  }
  if (storage != 1) {
    causes.push_back({"FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version",
                      "spec.versions"});
  }
}

}  // namespace

std::vector<Cause> validate_crd(const json& crd) {
  std::vector<Cause> causes;
  const json& spec = crd.contains("spec") ? crd["spec"] : json::object();
  require_string(spec, "group", "spec.group", causes);
  const json& names = spec.contains("names") ? spec["names"] : json::object();
  require_string(names, "plural", "spec.names.plural", causes);
  require_string(names, "kind", "spec.names.kind", causes);
  std::string scope = spec.value("scope", "");
  if (scope != "Namespaced" && scope != "Cluster") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\"",
                      "spec.scope"});
  }
  if (causes.empty()) {
    std::string expected = names["plural"].get<std::string>() + "." + spec["group"].get<std::string>();
    std::string name = crd.contains("metadata") ? crd["metadata"].value("name", "") : "";
    if (name != expected) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group",
                        "metadata.name"});
    }
  }
  check_versions(spec, causes);
  return causes;
}

Registry::Registry() {
  for (const BuiltIn& b : built_ins()) {
    ResourceType t;
    t.group = b.group;
    t.version = b.version;
    t.plural = b.plural;
    t.singular = b.singular;
    t.kind = b.kind;
    t.list_kind = t.kind + "List";
    t.scope = b.scope;
    t.status = b.status;
    t.generation = b.generation;
    t.short_names = b.short_names;
    t.storage_version = b.version;
    add(std::move(t));
  }
}

void Registry::add(ResourceType type) {
  auto key = std::make_tuple(type.group, type.version, type.plural);
  types_[key] = std::make_shared<const ResourceType>(std::move(type));
}

ResourcePtr Registry::find(const std::string& group, const std::string& version, const std::string& plural) const {
  std::lock_guard lock(mutex_);
  auto it = types_.find(std::make_tuple(group, version, plural));
  return it == types_.end() ? nullptr : it->second;
}

ResourcePtr Registry::find_group_resource(const std::string& group_resource) const {
  std::lock_guard lock(mutex_);
  ResourcePtr any;
  for (const auto& [key, type] : types_) {
    if (type->group_resource() != group_resource) continue;
    if (type->version == type->storage_version) return type;
    if (!any) any = type;
  }
  return any;
}

ResourcePtr Registry::find_kind(const std::string& api_version, const std::string& kind) const {
  std::lock_guard lock(mutex_);
  for (const auto& [key, type] : types_) {
    if (type->kind == kind && type->api_version() == api_version) return type;
  }
  return nullptr;
}

void Registry::register_crd(const json& crd) {
  std::vector<Cause> causes = validate_crd(crd);
  std::string name = crd["metadata"].value("name", "");
  if (!causes.empty())
    throw invalid("CustomResourceDefinition.apiextensions.k8s.io", "apiextensions.k8s.io", name, causes);
  const json& spec = crd["spec"];
  const json& names = spec["names"];
  std::string storage;
  for (const json& v : spec["versions"]) {
    if (v.value("storage", false)) storage = v["name"].get<std::string>();
  }
  std::vector<ResourceType> types;
  for (const json& v : spec["versions"]) {
    if (!v.value("served", true)) continue;
    ResourceType t;
    t.group = spec["group"].get<std::string>();
    t.version = v["name"].get<std::string>();
    t.plural = names["plural"].get<std::string>();
    t.singular = names.value("singular", "");
    if (t.singular.empty()) {
      t.singular = names["kind"].get<std::string>();
      std::transform(t.singular.begin(), t.singular.end(), t.singular.begin(), ::tolower);
    }
    t.kind = names["kind"].get<std::string>();
    t.list_kind = names.value("listKind", t.kind + "List");
    t.scope = spec.value("scope", "") == "Cluster" ? Scope::kCluster : Scope::kNamespaced;
    bool has_status = v.contains("subresources") && v["subresources"].contains("status");
    t.status = has_status ? StatusSubresource::kPresent : StatusSubresource::kAbsent;
    t.generation = Generation::kTracked;
    t.origin = Origin::kCustom;
    t.short_names = string_list(names.value("shortNames", json::array()));
    t.categories = string_list(names.value("categories", json::array()));
    t.schema = v["schema"]["openAPIV3Schema"];
    t.printer_columns = v.value("additionalPrinterColumns", json::array());
    t.storage_version = storage;
    types.push_back(std::move(t));
  }
  std::lock_guard lock(mutex_);
  for (const std::string& k : crd_keys_[name]) {
    auto first = k.find('/');
    auto second = k.find('/', first + 1);
    types_.erase(std::make_tuple(k.substr(0, first), k.substr(first + 1, second - first - 1), k.substr(second + 1)));
  }
  crd_keys_[name].clear();
  for (ResourceType& t : types) {
    crd_keys_[name].push_back(key_text(t.group, t.version, t.plural));
    add(std::move(t));
  }
}

void Registry::unregister_crd(const std::string& crd_name) {
  std::lock_guard lock(mutex_);
  for (const std::string& k : crd_keys_[crd_name]) {
    auto first = k.find('/');
    auto second = k.find('/', first + 1);
    types_.erase(std::make_tuple(k.substr(0, first), k.substr(first + 1, second - first - 1), k.substr(second + 1)));
  }
  crd_keys_.erase(crd_name);
}

std::vector<ResourcePtr> Registry::all() const {
  std::lock_guard lock(mutex_);
  std::vector<ResourcePtr> out;
  for (const auto& [key, type] : types_) out.push_back(type);
  return out;
}

std::vector<std::pair<std::string, std::string>> Registry::group_versions() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, type] : types_) {
    auto gv = std::make_pair(type->group, type->version);
    if (std::find(out.begin(), out.end(), gv) == out.end()) out.push_back(gv);
  }
  return out;  // std::map order: the core group ("") sorts first
}

std::vector<std::string> Registry::versions_of(const std::string& group) const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [key, type] : types_) {
    if (type->group != group || std::find(out.begin(), out.end(), type->version) != out.end()) continue;
    if (type->version == type->storage_version) {
      out.insert(out.begin(), type->version);
    } else {
      out.push_back(type->version);
    }
  }
  return out;
}

}  // namespace torus::standin

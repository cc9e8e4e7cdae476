#pragma once
// The resource types the stand-in serves: the built-in ones the operator, kubectl and the Helm chart touch, plus
// one entry per served version of every CustomResourceDefinition created at runtime.
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"

namespace torus::standin {

enum class Scope { kNamespaced, kCluster };
enum class StatusSubresource { kAbsent, kPresent };
// Whether metadata.generation counts spec changes (custom resources, Deployments) or is not kept (Pods in 1.32).
enum class Generation { kUntracked, kTracked };
enum class Origin { kBuiltIn, kCustom };

struct ResourceType {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;
  std::string singular;
  std::string kind;
  std::string list_kind;
  Scope scope = Scope::kNamespaced;
  StatusSubresource status = StatusSubresource::kAbsent;
  Generation generation = Generation::kUntracked;
  Origin origin = Origin::kBuiltIn;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::optional<json> schema;      // openAPIV3Schema of a custom resource version
  json printer_columns = nullptr;  // additionalPrinterColumns of a custom resource version
  std::string storage_version;     // the version objects are stored in (custom resources)

  // "pods", "trainingjobs.torus.dev": the key objects are stored under, shared by all versions of a resource.
  std::string group_resource() const { return group.empty() ? plural : plural + "." + group; }
  // "v1", "torus.dev/v1".
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // "TrainingJob.torus.dev", "Pod": how validation messages name the kind.
  std::string qualified_kind() const { return group.empty() ? kind : kind + "." + group; }
  bool namespaced() const { return scope == Scope::kNamespaced; }
};

using ResourcePtr = std::shared_ptr<const ResourceType>;

// A thread-safe table of resource types, keyed by (group, version, plural).
class Registry {
 public:
  Registry();  // with the built-in types

  ResourcePtr find(const std::string& group, const std::string& version, const std::string& plural) const;
  // Any served version of a group-qualified resource ("trainingjobs.torus.dev"), the storage one first.
  ResourcePtr find_group_resource(const std::string& group_resource) const;
  // The type of an apiVersion + kind pair, as an owner reference names it.
  ResourcePtr find_kind(const std::string& api_version, const std::string& kind) const;

  // Registers every served version of a CRD (a validated CustomResourceDefinition object); replaces the previous
  // registration of the same CRD. Throws ApiError (422) naming the field when the CRD is unusable.
  void register_crd(const json& crd);
  void unregister_crd(const std::string& crd_name);

  std::vector<ResourcePtr> all() const;
  // "v1", "apps/v1", "torus.dev/v1", ...: every group version with at least one resource, core first.
  std::vector<std::pair<std::string, std::string>> group_versions() const;
  // Versions of a group, preferred (storage or first built-in) first.
  std::vector<std::string> versions_of(const std::string& group) const;

 private:
  void add(ResourceType type);

  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, std::string, std::string>, ResourcePtr> types_;
  std::map<std::string, std::vector<std::string>> crd_keys_;  // crd name -> "group/version/plural" keys it added
};

// Checks a CustomResourceDefinition the way the apiserver does before accepting it (names, scope, versions,
// exactly one storage version, structural schemas). Returns the causes; empty when it is valid.
std::vector<Cause> validate_crd(const json& crd);

}  // namespace torus::standin

#pragma once
// RBAC as the apiserver's authorizer evaluates it (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac): a request's
// user is allowed when a ClusterRoleBinding, or a RoleBinding in the request's namespace, names the user (User,
// Group or ServiceAccount subject) and the role it refers to has a rule that covers the request. Pure: the caller
// hands in the stored Roles, ClusterRoles and bindings. Internal to tests/apiserver.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

struct UserInfo {
  std::string name;                 // "system:serviceaccount:torus-system:torus-operator", "standin-admin"
  std::vector<std::string> groups;  // "system:serviceaccounts", "system:authenticated", "system:masters", ...
};

// What the authorizer is asked: a resource request (resource set) or a non-resource path (discovery, /version).
struct RequestAttributes {
  UserInfo user;
  std::string verb;  // get, list, watch, create, update, patch, delete, deletecollection
  std::string api_group;
  std::string resource;     // plural, no group: "pods", "trainingjobs"
  std::string subresource;  // "status", "binding", "token" or empty
  std::string ns;           // empty: cluster-scoped, or a request across namespaces
  std::string name;         // empty for list, watch, create, deletecollection
  std::string path;         // a non-resource request's path, when resource is empty
  bool resource_request() const { return !resource.empty(); }
};

// The RBAC objects stored in the stand-in (rbac.authorization.k8s.io/v1, as JSON).
struct RbacObjects {
  std::vector<nlohmann::json> roles;
  std::vector<nlohmann::json> cluster_roles;
  std::vector<nlohmann::json> role_bindings;
  std::vector<nlohmann::json> cluster_role_bindings;
};

enum class Verdict { kAllow, kDeny };

struct Decision {
  Verdict verdict = Verdict::kDeny;
  // Why RBAC could not decide fully, as the apiserver appends it to a denial: `RBAC: role.rbac.authorization.k8s.io
  // "x" not found` for a binding whose role is missing; empty otherwise.
  std::string reason;
};

// system:masters is allowed everything (the apiserver's privileged-group authorizer, before RBAC); every
// authenticated user may read discovery, /version and the health checks (the bootstrap system:discovery and
// system:public-info-viewer roles); anything else is RBAC's.
Decision authorize(const RequestAttributes& request, const RbacObjects& rbac);

// The 403 message of a denied request, word for word the apiserver's:
// `pods is forbidden: User "u" cannot list resource "pods" in API group "" in the namespace "default"`.
std::string forbidden_message(const RequestAttributes& request, const std::string& reason);

// A service account's user: its name and groups, as the service-account token authenticator reports them.
UserInfo service_account_user(const std::string& ns, const std::string& name);

}  // namespace torus::standin

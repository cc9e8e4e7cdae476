#include "tests/apiserver/rbac.h"

#include <algorithm>

namespace torus::standin {

namespace {

using json = nlohmann::json;

constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";

bool has(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::vector<std::string> strings(const json& object, const char* field) {
  std::vector<std::string> out;
  if (!object.is_object() || !object.contains(field) || !object[field].is_array()) return out;
  for (const json& v : object[field]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::string str(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string() ? object[field].get<std::string>()
                                                                                   : "";
}

std::string meta(const json& object, const char* field) { return str(object.value("metadata", json::object()), field); }

bool matches_one(const std::vector<std::string>& allowed, const std::string& requested) {
  return has(allowed, "*") || has(allowed, requested);
}

// ResourceMatches: "*", the resource with its subresource ("pods/status"), or "*/status" for any resource's.
bool resource_matches(const std::vector<std::string>& rule_resources, const RequestAttributes& r) {
  const std::string combined = r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
  for (const std::string& rule : rule_resources) {
    if (rule == "*" || rule == combined) return true;
    if (!r.subresource.empty() && rule == "*/" + r.subresource) return true;
  }
  return false;
}

// A rule's nonResourceURLs: the path itself, "*", or a prefix ending in "*" ("/apis/*").
bool path_matches(const std::vector<std::string>& urls, const std::string& path) {
  for (const std::string& url : urls) {
    if (url == "*" || url == path) return true;
    if (!url.empty() && url.back() == '*' && path.rfind(url.substr(0, url.size() - 1), 0) == 0) return true;
  }
  return false;
}

bool rule_allows(const json& rule, const RequestAttributes& r) {
  if (!matches_one(strings(rule, "verbs"), r.verb)) return false;
  if (!r.resource_request()) return path_matches(strings(rule, "nonResourceURLs"), r.path);
  if (!matches_one(strings(rule, "apiGroups"), r.api_group)) return false;
  if (!resource_matches(strings(rule, "resources"), r)) return false;
  const std::vector<std::string> names = strings(rule, "resourceNames");
  return names.empty() || has(names, r.name);
}

// appliesToUser: a ServiceAccount subject without a namespace means the binding's own.
bool subject_matches(const json& subject, const UserInfo& user, const std::string& binding_ns) {
  const std::string kind = str(subject, "kind");
  const std::string name = str(subject, "name");
  if (kind == "User") return name == user.name;
  if (kind == "Group") return has(user.groups, name);
  if (kind == "ServiceAccount") {
    std::string ns = str(subject, "namespace");
    if (ns.empty()) ns = binding_ns;
    return service_account_user(ns, name).name == user.name;
  }
  return false;
}

bool binding_applies(const json& binding, const UserInfo& user) {
  if (!binding.contains("subjects") || !binding["subjects"].is_array()) return false;
  const std::string ns = meta(binding, "namespace");
  return std::any_of(binding["subjects"].begin(), binding["subjects"].end(),
                     [&](const json& s) { return subject_matches(s, user, ns); });
}

const json* find_named(const std::vector<json>& objects, const std::string& ns, const std::string& name) {
  for (const json& o : objects) {
    if (meta(o, "name") == name && meta(o, "namespace") == ns) return &o;
  }
  return nullptr;
}

bool labels_match(const json& object, const json& match_labels) {
  const json labels = object.value("metadata", json::object()).value("labels", json::object());
  for (const auto& [key, value] : match_labels.items()) {
    if (!labels.contains(key) || labels[key] != value) return false;
  }
  return true;
}

// An aggregated ClusterRole's rules are those of every ClusterRole its selectors match (the aggregation controller
// writes them into the role; here they are gathered when asked). Selectors with matchLabels only.
std::vector<json> cluster_role_rules(const json& role, const RbacObjects& rbac) {
  std::vector<json> rules = role.value("rules", json::array()).get<std::vector<json>>();
  const json aggregation = role.value("aggregationRule", json::object());
  for (const json& selector : aggregation.value("clusterRoleSelectors", json::array())) {
    const json match = selector.value("matchLabels", json::object());
    for (const json& other : rbac.cluster_roles) {
      if (meta(other, "name") == meta(role, "name") || !labels_match(other, match)) continue;
      for (const json& rule : other.value("rules", json::array())) rules.push_back(rule);
    }
  }
  return rules;
}

// The rules a binding grants, or why it grants none ("RBAC: role.rbac.authorization.k8s.io \"x\" not found").
std::vector<json> bound_rules(const json& binding, const RbacObjects& rbac, std::vector<std::string>& errors) {
  const json ref = binding.value("roleRef", json::object());
  const std::string kind = str(ref, "kind");
  const std::string name = str(ref, "name");
  const std::string ns = meta(binding, "namespace");
  if (kind == "ClusterRole") {
    if (const json* role = find_named(rbac.cluster_roles, "", name)) return cluster_role_rules(*role, rbac);
    errors.push_back("clusterrole." + std::string(kRbacGroup) + " \"" + name + "\" not found");
  } else if (kind == "Role" && !ns.empty()) {
    if (const json* role = find_named(rbac.roles, ns, name)) {
      return role->value("rules", json::array()).get<std::vector<json>>();
    }
    errors.push_back("role." + std::string(kRbacGroup) + " \"" + name + "\" not found");
  }
  return {};
}

// The bootstrap policy's discovery roles (system:discovery, system:public-info-viewer), bound to every
// authenticated user.
bool bootstrap_allows(const RequestAttributes& r) {
  static const std::vector<std::string> kPublic{"/api",     "/api/*",     "/apis",    "/apis/*",
                                                "/openapi", "/openapi/*", "/version", "/version/",
                                                "/healthz", "/livez",     "/readyz"};
  return !r.resource_request() && r.verb == "get" && path_matches(kPublic, r.path);
}

}  // namespace

UserInfo service_account_user(const std::string& ns, const std::string& name) {
  return {"system:serviceaccount:" + ns + ":" + name,
          {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}};
}

Decision authorize(const RequestAttributes& request, const RbacObjects& rbac) {
  if (has(request.user.groups, "system:masters")) return {Verdict::kAllow, ""};
  if (bootstrap_allows(request)) return {Verdict::kAllow, ""};
  std::vector<std::string> errors;
  auto any_rule = [&](const json& binding) {
    if (!binding_applies(binding, request.user)) return false;
    const std::vector<json> rules = bound_rules(binding, rbac, errors);
    return std::any_of(rules.begin(), rules.end(), [&](const json& rule) { return rule_allows(rule, request); });
  };
  for (const json& binding : rbac.cluster_role_bindings) {
    if (str(binding.value("roleRef", json::object()), "kind") == "ClusterRole" && any_rule(binding)) {
      return {Verdict::kAllow, ""};
    }
  }
  if (request.resource_request() && !request.ns.empty()) {
    for (const json& binding : rbac.role_bindings) {
      if (meta(binding, "namespace") == request.ns && any_rule(binding)) return {Verdict::kAllow, ""};
    }
  }
  Decision denied{Verdict::kDeny, ""};
  for (size_t i = 0; i < errors.size(); ++i) denied.reason += (i == 0 ? "RBAC: [" : ", ") + errors[i];
  if (errors.size() == 1) denied.reason = "RBAC: " + errors[0];
  if (errors.size() > 1) denied.reason += "]";
  return denied;
}

std::string forbidden_message(const RequestAttributes& r, const std::string& reason) {
  const std::string user = "User \"" + r.user.name + "\"";
  std::string message;
  if (!r.resource_request()) {
    message = "forbidden: " + user + " cannot " + r.verb + " path \"" + r.path + "\"";
  } else {
    const std::string qualified = r.api_group.empty() ? r.resource : r.resource + "." + r.api_group;
    const std::string resource = r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
    const std::string scope = r.ns.empty() ? "at the cluster scope" : "in the namespace \"" + r.ns + "\"";
    message = qualified + (r.name.empty() ? "" : " \"" + r.name + "\"") + " is forbidden: " + user + " cannot " +
              r.verb + " resource \"" + resource + "\" in API group \"" + r.api_group + "\" " + scope;
  }
  return reason.empty() ? message : message + ": " + reason;
}

}  // namespace torus::standin

// RBAC as the apiserver evaluates it: the pure authorizer (rbac.h) table-driven, then the stand-in enforcing it for
// a service account's token that the real kubectl minted (`kubectl create token`) and uses.
#include "tests/apiserver/rbac.h"

#include <gtest/gtest.h>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin {
namespace {

using json = nlohmann::json;

const UserInfo kOperator = service_account_user("torus-system", "torus-operator");

json rule(std::vector<std::string> groups, std::vector<std::string> resources, std::vector<std::string> verbs,
          std::vector<std::string> names = {}) {
  json r = {{"apiGroups", groups}, {"resources", resources}, {"verbs", verbs}};
  if (!names.empty()) r["resourceNames"] = names;
  return r;
}

json role(const std::string& kind, const std::string& ns, const std::string& name, json rules) {
  json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"kind", kind}, {"metadata", meta}, {"rules", rules}};
}

json binding(const std::string& ns, const std::string& name, const std::string& role_kind, const std::string& role_name,
             json subject) {
  json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"metadata", meta},
          {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role_name}}},
          {"subjects", json::array({subject})}};
}

const json kOperatorSubject = {{"kind", "ServiceAccount"}, {"name", "torus-operator"}, {"namespace", "torus-system"}};

// The chart's shape: a ClusterRole bound cluster-wide, a leader-election Role bound in torus-system, a Role in
// team-a granted through a RoleBinding to a ClusterRole, and a Role named by a binding but missing.
RbacObjects chart_like() {
  RbacObjects rbac;
  rbac.cluster_roles.push_back(
      role("ClusterRole", "", "torus-operator",
           json::array({rule({"torus.dev"}, {"trainingjobs"}, {"get", "list", "watch", "patch"}),
                        rule({"torus.dev"}, {"trainingjobs/status"}, {"get", "update", "patch"}),
                        rule({""}, {"pods"}, {"get", "list", "watch", "create", "delete"}),
                        rule({""}, {"nodes"}, {"get"})})));
  rbac.cluster_role_bindings.push_back(
      binding("", "torus-operator", "ClusterRole", "torus-operator", kOperatorSubject));
  rbac.roles.push_back(
      role("Role", "torus-system", "leader",
           json::array({rule({"coordination.k8s.io"}, {"leases"}, {"get", "update"}, {"torus-operator"}),
                        rule({"coordination.k8s.io"}, {"leases"}, {"create"})})));
  rbac.role_bindings.push_back(binding("torus-system", "leader", "Role", "leader", kOperatorSubject));
  rbac.cluster_roles.push_back(
      role("ClusterRole", "", "secrets-reader",
           json::array({rule({""}, {"secrets"}, {"get", "list"}), rule({"*"}, {"*/status"}, {"*"})})));
  rbac.role_bindings.push_back(
      binding("team-a", "secrets", "ClusterRole", "secrets-reader",
              {{"kind", "ServiceAccount"}, {"name", "torus-operator"}, {"namespace", "torus-system"}}));
  rbac.role_bindings.push_back(binding("team-b", "gone", "Role", "missing", kOperatorSubject));
  rbac.cluster_role_bindings.push_back(
      binding("", "group-wide", "ClusterRole", "viewer", {{"kind", "Group"}, {"name", "viewers"}}));
  rbac.cluster_roles.push_back(
      role("ClusterRole", "", "viewer", json::array({rule({"apps"}, {"deployments"}, {"list"})})));
  return rbac;
}

struct Case {
  const char* what;
  UserInfo user;
  const char* verb;
  const char* group;
  const char* resource;
  const char* subresource;
  const char* ns;
  const char* name;
  Verdict want;
};

class AuthorizeTable : public ::testing::TestWithParam<Case> {};

TEST_P(AuthorizeTable, DecidesAsKubernetesRbac) {
  const Case& c = GetParam();
  RequestAttributes r{c.user, c.verb, c.group, c.resource, c.subresource, c.ns, c.name, ""};
  EXPECT_EQ(authorize(r, chart_like()).verdict, c.want) << c.what << ": " << forbidden_message(r, "");
}

const UserInfo kStranger = service_account_user("default", "default");
const UserInfo kViewer{"alice", {"viewers", "system:authenticated"}};
const UserInfo kAdmin{"admin", {"system:masters", "system:authenticated"}};

INSTANTIATE_TEST_SUITE_P(
    Rules, AuthorizeTable,
    ::testing::Values(
        Case{"cluster role, any namespace", kOperator, "list", "", "pods", "", "default", "", Verdict::kAllow},
        Case{"cluster role, all namespaces", kOperator, "watch", "", "pods", "", "", "", Verdict::kAllow},
        Case{"verb not granted", kOperator, "patch", "", "pods", "", "default", "p", Verdict::kDeny},
        Case{"deletecollection is its own verb", kOperator, "deletecollection", "", "pods", "", "x", "",
             Verdict::kDeny},
        Case{"group must match", kOperator, "list", "apps", "pods", "", "x", "", Verdict::kDeny},
        Case{"subresource granted", kOperator, "update", "torus.dev", "trainingjobs", "status", "x", "j",
             Verdict::kAllow},
        Case{"main resource rule does not cover status", kOperator, "update", "torus.dev", "trainingjobs", "", "x", "j",
             Verdict::kDeny},
        Case{"status rule does not cover the main resource", kOperator, "patch", "", "pods", "status", "x", "p",
             Verdict::kDeny},
        Case{"cluster-scoped read", kOperator, "get", "", "nodes", "", "", "node-0", Verdict::kAllow},
        Case{"cluster-scoped list not granted", kOperator, "list", "", "nodes", "", "", "", Verdict::kDeny},
        Case{"role in its namespace", kOperator, "update", "coordination.k8s.io", "leases", "", "torus-system",
             "torus-operator", Verdict::kAllow},
        Case{"resourceNames limit", kOperator, "update", "coordination.k8s.io", "leases", "", "torus-system", "other",
             Verdict::kDeny},
        Case{"resourceNames never cover a request without a name", kOperator, "get", "coordination.k8s.io", "leases",
             "", "torus-system", "", Verdict::kDeny},
        Case{"role outside its namespace", kOperator, "create", "coordination.k8s.io", "leases", "", "default", "",
             Verdict::kDeny},
        Case{"rolebinding to a clusterrole, its namespace", kOperator, "get", "", "secrets", "", "team-a", "s",
             Verdict::kAllow},
        Case{"rolebinding to a clusterrole, another namespace", kOperator, "get", "", "secrets", "", "team-b", "s",
             Verdict::kDeny},
        Case{"rolebinding never grants cluster-wide", kOperator, "list", "", "secrets", "", "", "", Verdict::kDeny},
        Case{"*/status with * verbs", kOperator, "patch", "apps", "deployments", "status", "team-a", "d",
             Verdict::kAllow},
        Case{"another service account", kStranger, "list", "", "pods", "", "default", "", Verdict::kDeny},
        Case{"group subject", kViewer, "list", "apps", "deployments", "", "x", "", Verdict::kAllow},
        Case{"group subject, other verb", kViewer, "get", "apps", "deployments", "", "x", "d", Verdict::kDeny},
        Case{"system:masters", kAdmin, "deletecollection", "", "nodes", "", "", "", Verdict::kAllow}));

TEST(Authorize, EveryAuthenticatedUserReadsDiscoveryButNoOtherPath) {
  RequestAttributes r{kStranger, "get", "", "", "", "", "", "/apis/torus.dev/v1alpha1"};
  EXPECT_EQ(authorize(r, {}).verdict, Verdict::kAllow);
  r.path = "/openapi/v3";
  EXPECT_EQ(authorize(r, {}).verdict, Verdict::kAllow);
  r.path = "/metrics";
  EXPECT_EQ(authorize(r, {}).verdict, Verdict::kDeny);
  EXPECT_EQ(forbidden_message(r, ""),
            "forbidden: User \"system:serviceaccount:default:default\" cannot get path \"/metrics\"");
}

TEST(Authorize, AggregatedClusterRoleGrantsTheRulesOfTheRolesItSelects) {
  RbacObjects rbac;
  json aggregate = role("ClusterRole", "", "aggregate", json::array());
  aggregate["aggregationRule"] = {
      {"clusterRoleSelectors", json::array({{{"matchLabels", {{"torus.dev/agg", "true"}}}}})}};
  json part = role("ClusterRole", "", "part", json::array({rule({""}, {"configmaps"}, {"list"})}));
  part["metadata"]["labels"] = {{"torus.dev/agg", "true"}};
  rbac.cluster_roles = {aggregate, part};
  rbac.cluster_role_bindings.push_back(binding("", "b", "ClusterRole", "aggregate", kOperatorSubject));
  RequestAttributes r{kOperator, "list", "", "configmaps", "", "x", "", ""};
  EXPECT_EQ(authorize(r, rbac).verdict, Verdict::kAllow);
  rbac.cluster_roles[1]["metadata"]["labels"]["torus.dev/agg"] = "false";
  EXPECT_EQ(authorize(r, rbac).verdict, Verdict::kDeny);
}

TEST(Authorize, DenialsAreWordedAsTheApiserverWordsThem) {
  RequestAttributes list{kOperator, "list", "", "pods", "", "default", "", ""};
  EXPECT_EQ(forbidden_message(list, ""),
            "pods is forbidden: User \"system:serviceaccount:torus-system:torus-operator\" cannot list resource "
            "\"pods\" in API group \"\" in the namespace \"default\"");
  RequestAttributes status{kOperator, "update", "torus.dev", "trainingjobs", "status", "", "j", ""};
  status.ns = "team-a";
  EXPECT_EQ(forbidden_message(status, ""),
            "trainingjobs.torus.dev \"j\" is forbidden: User \"system:serviceaccount:torus-system:torus-operator\" "
            "cannot update resource \"trainingjobs/status\" in API group \"torus.dev\" in the namespace \"team-a\"");
  RequestAttributes nodes{kOperator, "list", "", "nodes", "", "", "", ""};
  EXPECT_EQ(forbidden_message(nodes, ""),
            "nodes is forbidden: User \"system:serviceaccount:torus-system:torus-operator\" cannot list resource "
            "\"nodes\" in API group \"\" at the cluster scope");
  // A binding whose Role is missing: RBAC says so after the denial.
  RequestAttributes missing{kOperator, "get", "", "configmaps", "", "team-b", "c", ""};
  const Decision d = authorize(missing, chart_like());
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.reason, "RBAC: role.rbac.authorization.k8s.io \"missing\" not found");
}

}  // namespace

namespace testing {
namespace {

// HTTPS and authentication, so tokens and RBAC apply; the fixture's kubectl is the admin (system:masters).
class RbacStandinTest : public StandinTest {
 protected:
  ServerOptions server_options() const override { return authenticated_options(); }
};

TEST_F(RbacStandinTest, AServiceAccountTokenIsRefusedWhatItsRolesDoNotGrant) {
  ok({"apply", "-f",
      write_file("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: worker, namespace: default}\n")});
  // The TokenRequest API, as a cluster mints service-account tokens.
  const std::string token = ok({"create", "token", "worker", "-n", "default"});
  ASSERT_FALSE(token.empty());
  const Kubectl sa = as_token(token.substr(0, token.find_last_not_of("\n") + 1));
  CommandResult denied = sa.run({"get", "pods", "-n", "default"});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.err.find("pods is forbidden: User \"system:serviceaccount:default:worker\" cannot list resource "
                            "\"pods\" in API group \"\" in the namespace \"default\""),
            std::string::npos)
      << denied.err;
  ok({"apply", "-f", write_file("rbac.yaml", R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: default}
rules: [{apiGroups: [""], resources: [pods], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-reader, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: worker, namespace: default}]
)")});
  CommandResult allowed = sa.run({"get", "pods", "-n", "default"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  CommandResult other_ns = sa.run({"get", "pods", "-n", "kube-system"});
  EXPECT_NE(other_ns.err.find("in the namespace \"kube-system\""), std::string::npos) << other_ns.err;
  CommandResult create = sa.run({"apply", "-f",
                                 write_file("cm.yaml",
                                            "apiVersion: v1\nkind: ConfigMap\nmetadata: "
                                            "{name: c, namespace: default}\n")});
  EXPECT_NE(create.exit_code, 0);
  EXPECT_NE(create.err.find("cannot get resource \"configmaps\""), std::string::npos) << create.err;
  // The token dies with its account.
  ok({"delete", "serviceaccount", "worker", "-n", "default"});
  CommandResult gone = sa.run({"get", "pods", "-n", "default"});
  EXPECT_NE(gone.err.find("Unauthorized"), std::string::npos) << gone.err;
}

TEST_F(RbacStandinTest, NoTokenForAMissingServiceAccount) {
  CommandResult r = kubectl({"create", "token", "nobody", "-n", "default"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("serviceaccounts \"nobody\" not found"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace testing
}  // namespace torus::standin

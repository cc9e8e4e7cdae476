// The pods/eviction subresource (tests/apiserver/eviction.h) as kube-apiserver answers it, and the real
// `kubectl drain` using it: the DisruptionTarget condition before the graceful deletion, budgets, 404/400/429/500,
// dry run, discovery, RBAC (create on pods/eviction), and the cordon that keeps new pods off the node.
#include "tests/apiserver/eviction.h"

#include <gtest/gtest.h>

#include "tests/apiserver/scheduling.h"
#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

namespace http = boost::beast::http;

class EvictionTest : public StandinTest {
 protected:
  std::string pod_yaml(const std::string& name, const std::string& extra_spec = "") {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  labels: {app: a}\nspec:\n" + extra_spec +
           "  restartPolicy: Never\n  containers: [{name: worker, image: torus-worker:1}]\n";
  }
  void run_pod(const std::string& name) {
    ok({"apply", "-f", write_file(name + ".yaml", pod_yaml(name))});
    ok({"wait", "--for=condition=Ready", "pod/" + name, "--timeout=10s"});
  }
  static std::string eviction(const std::string& name, const std::string& delete_options = "") {
    json e = {
        {"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", name}, {"namespace", "default"}}}};
    if (!delete_options.empty()) e["deleteOptions"] = json::parse(delete_options);
    return e.dump();
  }
  HttpReply evict(const std::string& pod, const std::string& body, const std::string& query = "") {
    return http_request(server_->port(), http::verb::post,
                        "/api/v1/namespaces/default/pods/" + pod + "/eviction" + query, body);
  }
  std::optional<json> pod(const std::string& name) {
    const CommandResult r = kubectl({"get", "pod", name, "-o", "json"});
    if (r.exit_code != 0) return std::nullopt;
    return json::parse(r.out);
  }
  // The pod's condition of `type` (a pointer into `pod`), or null.
  static const json* condition(const json& pod, const std::string& type) {
    const auto status = pod.find("status");
    if (status == pod.end() || !status->contains("conditions")) return nullptr;
    for (const json& c : (*status)["conditions"]) {
      if (c.value("type", "") == type) return &c;
    }
    return nullptr;
  }
  WatchClient watch_pods() {
    return WatchClient(server_->port(), "/api/v1/namespaces/default/pods?watch=1&resourceVersion=" +
                                            std::to_string(server_->store().resource_version()));
  }
  void budget(const std::string& name, const std::string& selector = "{matchLabels: {app: a}}") {
    ok({"apply", "-f",
        write_file(name + ".yaml", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: " + name +
                                       "}\nspec: {minAvailable: 1, selector: " + selector + "}\n")});
  }
  // The budget's status as the disruption controller would write it (the stand-in runs none).
  void budget_status(const std::string& name, int allowed, int generation = 1) {
    ok({"patch", "pdb", name, "--subresource=status", "--type=merge", "-p",
        json{{"status",
              {{"observedGeneration", generation},
               {"disruptionsAllowed", allowed},
               {"currentHealthy", 1},
               {"desiredHealthy", 1},
               {"expectedPods", 1}}}}
            .dump()});
  }
};

// Kubernetes' order (addConditionAndDeletePod): the condition first, through the status, then the graceful
// deletion with the Eviction's grace, which the kubelet finishes.
TEST_F(EvictionTest, AnEvictionAddsTheDisruptionTargetConditionThenDeletesThePodWithItsGrace) {
  run_pod("p0");
  WatchClient watch = watch_pods();
  const HttpReply reply = evict("p0", eviction("p0", R"({"gracePeriodSeconds": 7})"));
  EXPECT_EQ(reply.status, 201) << reply.body;
  const json status = reply.body_json();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["status"], "Success");
  EXPECT_EQ(status["code"], 201);
  const std::vector<json> events = watch.until("DELETED");
  ASSERT_GE(events.size(), 3u);
  const json& marked = events[0]["object"];
  EXPECT_EQ(events[0]["type"], "MODIFIED");
  EXPECT_FALSE(marked["metadata"].contains("deletionTimestamp")) << marked.dump();
  const json* c = condition(marked, "DisruptionTarget");
  ASSERT_NE(c, nullptr) << marked["status"].dump();
  EXPECT_EQ((*c)["status"], "True");
  EXPECT_EQ((*c)["reason"], "EvictionByEvictionAPI");
  EXPECT_EQ((*c)["message"], "Eviction API: evicting");
  EXPECT_TRUE((*c).contains("lastTransitionTime"));
  const json& deleting = events[1]["object"];
  EXPECT_EQ(events[1]["type"], "MODIFIED");
  EXPECT_EQ(deleting["metadata"].value("deletionGracePeriodSeconds", 0), 7) << deleting["metadata"].dump();
  EXPECT_NE(condition(deleting, "DisruptionTarget"), nullptr);
  EXPECT_EQ(events.back()["type"], "DELETED");
  EXPECT_FALSE(pod("p0"));
}

TEST_F(EvictionTest, AMissingPodIsNotFoundAndAnotherNameIsABadRequest) {
  HttpReply r = evict("nope", eviction("nope"));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.body_json()["message"], "pods \"nope\" not found");
  run_pod("p0");
  r = evict("p0", eviction("p1"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body_json()["message"], "name in URL does not match name in Eviction object");
  r = http_request(server_->port(), http::verb::get, "/api/v1/namespaces/default/pods/p0/eviction");
  EXPECT_EQ(r.status, 405) << r.body;
  r = http_request(server_->port(), http::verb::post, "/apis/apps/v1/namespaces/default/deployments/d/eviction",
                   eviction("d"));
  EXPECT_EQ(r.status, 404) << r.body;  // only pods have it
  const json still = *pod("p0");
  EXPECT_EQ(condition(still, "DisruptionTarget"), nullptr);
  EXPECT_FALSE(still["metadata"].contains("deletionTimestamp"));
}

TEST_F(EvictionTest, ADryRunChangesNothing) {
  run_pod("p0");
  EXPECT_EQ(evict("p0", eviction("p0"), "?dryRun=All").status, 201);
  EXPECT_EQ(evict("p0", eviction("p0", R"({"dryRun": ["All"]})")).status, 201);
  const json still = *pod("p0");
  EXPECT_EQ(condition(still, "DisruptionTarget"), nullptr) << still["status"].dump();
  EXPECT_FALSE(still["metadata"].contains("deletionTimestamp"));
}

// The budget's status decides, as the disruption controller left it: 429 until it has caught up with the budget's
// generation, 429 while no disruption is allowed, then one eviction spends one.
TEST_F(EvictionTest, ABudgetDecidesFromItsStatus) {
  run_pod("p0");
  budget("b");
  HttpReply r = evict("p0", eviction("p0"));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.retry_after, "10");
  json s = r.body_json();
  EXPECT_EQ(s["reason"], "TooManyRequests");
  EXPECT_EQ(s["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
  ASSERT_EQ(s["details"]["causes"].size(), 1u) << s.dump();
  EXPECT_EQ(s["details"]["causes"][0]["reason"], "DisruptionBudget");
  EXPECT_EQ(s["details"]["causes"][0]["message"], "The disruption budget b is still being processed by the server.");

  budget_status("b", 0);
  r = evict("p0", eviction("p0"));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.retry_after, "");
  EXPECT_EQ(r.body_json()["details"]["causes"][0]["message"],
            "The disruption budget b needs 1 healthy pods and has 1 currently");
  EXPECT_EQ(condition(*pod("p0"), "DisruptionTarget"), nullptr);

  budget_status("b", 1);
  r = evict("p0", eviction("p0"));
  EXPECT_EQ(r.status, 201) << r.body;
  const json pdb = get_json({"get", "pdb", "b", "-o", "json"});
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 0) << pdb["status"].dump();
  EXPECT_TRUE(pdb["status"]["disruptedPods"].contains("p0")) << pdb["status"].dump();
}

TEST_F(EvictionTest, TwoBudgetsForOnePodAreAServerError) {
  run_pod("p0");
  budget("b1");
  budget("b2", "{matchExpressions: [{key: app, operator: In, values: [a]}]}");
  budget("other", "{matchLabels: {app: z}}");
  const HttpReply r = evict("p0", eviction("p0"));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(r.body_json()["message"],
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.");
  EXPECT_EQ(condition(*pod("p0"), "DisruptionTarget"), nullptr);
}

// A pod that cannot count towards a budget (Pending, finished, being deleted) goes whatever the budget says.
TEST_F(EvictionTest, APendingPodIsEvictedDespiteABudget) {
  ok({"create", "--raw", "/_standin/kubelet", "-f",
      write_file("hold.json", R"({"action":"holdPending","namespace":"default","name":"p0"})")});
  ok({"apply", "-f", write_file("p0.yaml", pod_yaml("p0"))});
  budget("b");
  budget_status("b", 0);
  WatchClient watch = watch_pods();
  EXPECT_EQ(evict("p0", eviction("p0")).status, 201);
  const std::vector<json> events = watch.until("DELETED");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "DELETED");
  EXPECT_NE(condition(events.back()["object"], "DisruptionTarget"), nullptr) << events.back().dump();
}

TEST_F(EvictionTest, DiscoveryNamesTheSubresourceWithItsGroupAndVersion) {
  const json v1 = json::parse(http_request(server_->port(), http::verb::get, "/api/v1").body);
  json found;
  for (const json& r : v1["resources"]) {
    if (r["name"] == "pods/eviction") found = r;
  }
  ASSERT_FALSE(found.is_null()) << v1.dump();
  EXPECT_EQ(found["group"], "policy");
  EXPECT_EQ(found["version"], "v1");
  EXPECT_EQ(found["kind"], "Eviction");
  EXPECT_EQ(found["verbs"], json::array({"create"}));
}

// `kubectl drain`: cordons the node (spec.unschedulable), then evicts the selected pods through policy/v1 (the
// stand-in's discovery says it may) and waits until they are gone. A new pod is kept off the cordoned node as
// kube-scheduler's NodeUnschedulable plugin keeps it.
TEST_F(EvictionTest, KubectlDrainCordonsTheNodeAndEvictsThroughTheEvictionApi) {
  run_pod("p0");
  const std::string node = (*pod("p0"))["spec"].value("nodeName", "");
  ASSERT_FALSE(node.empty());
  WatchClient watch = watch_pods();
  const CommandResult drained = kubectl({"drain", node, "--pod-selector=app=a", "--ignore-daemonsets",
                                         "--delete-emptydir-data", "--force", "--timeout=30s"});
  EXPECT_EQ(drained.exit_code, 0) << drained.out << drained.err;
  EXPECT_NE((drained.out + drained.err).find("evicting pod default/p0"), std::string::npos)
      << drained.out << drained.err;
  EXPECT_NE(drained.out.find("pod/p0 evicted"), std::string::npos) << drained.out;
  const std::vector<json> events = watch.until("DELETED");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "DELETED");
  const json* c = condition(events.back()["object"], "DisruptionTarget");
  ASSERT_NE(c, nullptr) << "deleted, not evicted: " << events.back().dump();
  EXPECT_EQ((*c)["reason"], "EvictionByEvictionAPI");
  EXPECT_EQ(get_json({"get", "node", node, "-o", "json"})["spec"].value("unschedulable", false), true);

  ok({"apply", "-f",
      write_file("p1.yaml", pod_yaml("p1", "  nodeSelector: {kubernetes.io/hostname: " + node + "}\n"))});
  ok({"wait", "--for=condition=PodScheduled=False", "pod/p1", "--timeout=10s"});
  const json p1 = *pod("p1");
  const json* scheduled = condition(p1, "PodScheduled");
  ASSERT_NE(scheduled, nullptr);
  EXPECT_EQ((*scheduled)["message"],
            "0/4 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 1 node(s) were "
            "unschedulable.");
  // A pod that tolerates the cordon (as DaemonSet pods do) is placed there.
  ok({"apply", "-f",
      write_file("p2.yaml",
                 pod_yaml("p2", "  nodeSelector: {kubernetes.io/hostname: " + node +
                                    "}\n  tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, "
                                    "effect: NoSchedule}]\n"))});
  ok({"wait", "--for=condition=Ready", "pod/p2", "--timeout=10s"});
  ok({"uncordon", node});
  EXPECT_FALSE(get_json({"get", "node", node, "-o", "json"})["spec"].value("unschedulable", false));
}

TEST(NodeUnschedulable, ACordonedNodeTakesOnlyPodsThatTolerateIt) {
  NodeView cordoned{"node-0", json::object(), json::array(), 8, 0, true};
  const json plain = {{"metadata", {{"name", "p"}, {"namespace", "default"}}},
                      {"spec", {{"containers", json::array()}}}};
  EXPECT_EQ(unfit_reason(plain, cordoned, {cordoned}, {}), "node(s) were unschedulable");
  json tolerant = plain;
  tolerant["spec"]["tolerations"] = {
      {{"key", "node.kubernetes.io/unschedulable"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}};
  EXPECT_EQ(unfit_reason(tolerant, cordoned, {cordoned}, {}), "");
  cordoned.unschedulable = false;
  EXPECT_EQ(unfit_reason(plain, cordoned, {cordoned}, {}), "");
}

// RBAC: an eviction is the create verb on pods/eviction; create on pods does not cover it.
class EvictionRbacTest : public EvictionTest {
 protected:
  ServerOptions server_options() const override { return authenticated_options(); }
  std::string role(const std::string& resources) {
    return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: evictor, namespace: default}\n"
           "rules: [{apiGroups: [\"\"], resources: " +
           resources +
           ", verbs: [create]}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: "
           "{name: evictor, namespace: default}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: "
           "evictor}\nsubjects: [{kind: ServiceAccount, name: evictor, namespace: default}]\n";
  }
};

TEST_F(EvictionRbacTest, AnEvictionIsCreateOnPodsEviction) {
  run_pod("p0");
  ok({"apply", "-f",
      write_file("sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: evictor, namespace: default}\n")});
  const std::string token = ok({"create", "token", "evictor", "-n", "default"});
  const Kubectl sa = as_token(token.substr(0, token.find_last_not_of('\n') + 1));
  const std::string body = write_file("eviction.json", eviction("p0"));
  const std::string path = "/api/v1/namespaces/default/pods/p0/eviction";
  ok({"apply", "-f", write_file("role.yaml", role("[pods]"))});
  CommandResult denied = sa.run({"create", "--raw", path, "-f", body});
  EXPECT_NE(denied.exit_code, 0);
  EXPECT_NE(denied.err.find("cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"default\""),
            std::string::npos)
      << denied.err;
  ok({"apply", "-f", write_file("role.yaml", role("[pods/eviction]"))});
  CommandResult allowed = sa.run({"create", "--raw", path, "-f", body});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.out.find("\"status\":\"Success\""), std::string::npos) << allowed.out;
}

}  // namespace
}  // namespace torus::standin::testing

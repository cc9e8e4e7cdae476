// The simulated scheduler (tests/apiserver/scheduling.h) driven by the real kubectl: what kube-scheduler refuses,
// it refuses, in kube-scheduler's words; another scheduler's pods wait for that scheduler.
#include "tests/apiserver/scheduling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/util/error.h"
#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using ::testing::HasSubstr;

class SchedulingTest : public StandinTest {
 protected:
  // A pod with `spec` lines (indented two spaces) before its container; `resources` inside the container.
  std::string pod(const std::string& name, const std::string& spec = "", const std::string& resources = "{}") {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", labels: {app: a}}\nspec:\n  restartPolicy: Never\n" +
           spec + "  containers: [{name: w, image: i:1, resources: " + resources + "}]\n";
  }
  std::string scheduled_message(const std::string& name) {
    ok({"wait", "--for=condition=PodScheduled=False", "pod/" + name, "--timeout=10s"});
    const json pod = get_json({"get", "pod", name, "-o", "json"});
    for (const json& c : pod["status"]["conditions"]) {
      if (c.value("type", "") == "PodScheduled") return c.value("message", "");
    }
    return "";
  }
  std::string node_of(const std::string& pod) {
    return get_json({"get", "pod", pod, "-o", "json"})["spec"].value("nodeName", "");
  }
};

TEST(Scheduling, CpuQuantitiesAndRequests) {
  EXPECT_DOUBLE_EQ(cpu_cores("500m"), 0.5);
  EXPECT_DOUBLE_EQ(cpu_cores("2"), 2.0);
  EXPECT_DOUBLE_EQ(cpu_cores(1.5), 1.5);
  const json pod = {{"spec",
                     {{"containers",
                       {{{"resources", {{"requests", {{"cpu", "250m"}}}, {"limits", {{"cpu", "1"}}}}}},
                        {{"resources", {{"limits", {{"cpu", "2"}, {"nvidia.com/gpu", 1}}}}}}}}}}};
  EXPECT_DOUBLE_EQ(cpu_requested(pod), 2.25);  // a request wins over the limit; a lone limit is the request
  EXPECT_EQ(gpus_requested(pod), 1);
  EXPECT_EQ(unschedulable_message(4, {{"Insufficient cpu", 3}, {"node(s) had untolerated taint {a: b}", 1}}),
            "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) had untolerated taint {a: b}.");
}

// k8s.io/api's ToleratesTaint, case by case.
TEST(Scheduling, TolerationsMatchTaintsAsKubernetesDoes) {
  const json gpu = parse_taint("nvidia.com/gpu=present:NoSchedule", "taint");
  EXPECT_EQ(gpu, (json{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}));
  EXPECT_EQ(parse_taint("dedicated:NoExecute", "taint"), (json{{"key", "dedicated"}, {"effect", "NoExecute"}}));
  EXPECT_THROW(parse_taint("nvidia.com/gpu=present", "--gpu-node-taint"), InvalidArgument);
  EXPECT_THROW(parse_taint("=x:NoSchedule", "--gpu-node-taint"), InvalidArgument);
  EXPECT_TRUE(tolerates({{"operator", "Exists"}}, gpu));  // empty key and effect: every taint
  EXPECT_TRUE(tolerates({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}, gpu));
  EXPECT_FALSE(tolerates({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoExecute"}}, gpu));
  EXPECT_TRUE(tolerates({{"key", "nvidia.com/gpu"}, {"value", "present"}}, gpu));  // no operator: Equal
  EXPECT_FALSE(tolerates({{"key", "nvidia.com/gpu"}, {"operator", "Equal"}, {"value", "true"}}, gpu));
  EXPECT_FALSE(tolerates({{"key", "nvidia.com/gpu"}}, gpu));  // Equal to the empty value
  EXPECT_FALSE(tolerates({{"key", "other"}, {"operator", "Exists"}}, gpu));
  EXPECT_FALSE(tolerates({{"key", "nvidia.com/gpu"}, {"operator", "Gt"}, {"value", "1"}}, gpu));
}

NodeView node(const std::string& name, json taints = json::array(), json labels = json::object()) {
  NodeView n{name, std::move(labels), std::move(taints), 8, 1};
  n.memory = 64.0 * (1 << 30);
  return n;
}

// Filters in kube-scheduler's order (the taint before the selector), every short resource named, init containers
// counted as the largest of them.
TEST(Scheduling, FiltersRunInKubeSchedulersOrderAndCountEveryShortResource) {
  const json pod = {{"metadata", {{"namespace", "ns"}}},
                    {"spec",
                     {{"nodeSelector", {{"zone", "a"}}},
                      {"containers", {{{"resources", {{"requests", {{"cpu", "4"}, {"memory", "40Gi"}}}}}}}},
                      {"initContainers", {{{"resources", {{"requests", {{"cpu", "6"}, {"memory", "1Gi"}}}}}}}}}}};
  EXPECT_DOUBLE_EQ(cpu_requested(pod), 6);  // the init container's 6 over the containers' 4
  EXPECT_DOUBLE_EQ(memory_requested(pod), 40.0 * (1 << 30));
  const NodeView tainted = node("t", json::array({parse_taint("a=b:NoExecute", "t")}));
  EXPECT_EQ(unfit_reason(pod, tainted, {tainted}, {}), "node(s) had untolerated taint {a: b}");
  const NodeView elsewhere = node("e");
  EXPECT_EQ(unfit_reason(pod, elsewhere, {elsewhere}, {}), "node(s) didn't match Pod's node affinity/selector");
  const NodeView busy = node("b", json::array(), {{"zone", "a"}});
  const std::vector<PlacedPod> placed = {{"ns", json::object(), "b", 4, 0, 30.0 * (1 << 30)}};
  EXPECT_EQ(unfit_reasons(pod, busy, {busy}, placed),
            (std::vector<std::string>{"Insufficient cpu", "Insufficient memory"}));
  const Placement none = choose_node(pod, {tainted, elsewhere, busy}, placed);
  EXPECT_EQ(none.node, "");
  EXPECT_EQ(unschedulable_message(3, none.reasons),
            "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 node(s) didn't match Pod's node "
            "affinity/selector, 1 node(s) had untolerated taint {a: b}.");
}

// TaintToleration's score: fewest intolerable PreferNoSchedule taints first, whatever the load; a toleration of
// every effect counts, one of NoSchedule only does not.
TEST(Scheduling, PreferNoScheduleTaintsSteerPodsElsewhere) {
  const json avoid = parse_taint("spot=yes:PreferNoSchedule", "t");
  const NodeView two = node("two", json::array({avoid, parse_taint("old=yes:PreferNoSchedule", "t")}));
  const NodeView one = node("one", json::array({avoid}));
  const NodeView clean = node("clean");
  const std::vector<PlacedPod> busy_clean = {{"", json::object(), "clean", 0, 0, 0}, {"", json::object(), "clean", 0, 0, 0}};
  const json plain = {{"spec", {{"containers", json::array({json::object()})}}}};
  EXPECT_EQ(intolerable_prefer_no_schedule(plain, two), 2);
  EXPECT_EQ(choose_node(plain, {two, one, clean}, busy_clean).node, "clean");
  EXPECT_EQ(choose_node(plain, {two, one}, {}).node, "one");
  json tolerant = plain;
  tolerant["spec"]["tolerations"] = json::array({{{"key", "spot"}, {"operator", "Exists"}}});
  EXPECT_EQ(intolerable_prefer_no_schedule(tolerant, one), 0);
  EXPECT_EQ(choose_node(tolerant, {one, clean}, busy_clean).node, "one");  // the less loaded, now its taint is fine
  json no_schedule_only = plain;
  no_schedule_only["spec"]["tolerations"] =
      json::array({{{"key", "spot"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  EXPECT_EQ(intolerable_prefer_no_schedule(no_schedule_only, one), 1);
}

// The taint manager's verdict: untolerated NoExecute now, the shortest tolerationSeconds, or never.
TEST(Scheduling, NoExecuteGraceIsTheShortestTolerationSeconds) {
  const json taints = json::array({parse_taint("a=1:NoExecute", "t"), parse_taint("b:NoExecute", "t"),
                                   parse_taint("c:NoSchedule", "t")});
  auto pod = [](json tolerations) { return json{{"spec", {{"tolerations", std::move(tolerations)}}}}; };
  EXPECT_EQ(noexecute_grace(pod(json::array()), taints), std::chrono::seconds(0));
  EXPECT_EQ(noexecute_grace(pod(json::array({{{"key", "a"}, {"operator", "Exists"}}})), taints),
            std::chrono::seconds(0));  // b is not tolerated
  EXPECT_EQ(noexecute_grace(pod(json::array({{{"operator", "Exists"}}})), taints), std::nullopt);
  EXPECT_EQ(noexecute_grace(pod(json::array({{{"key", "a"}, {"value", "1"}, {"tolerationSeconds", 30}},
                                             {{"key", "b"}, {"operator", "Exists"}, {"tolerationSeconds", 10}}})),
                            taints),
            std::chrono::seconds(10));
  EXPECT_EQ(noexecute_grace(pod(json::array({{{"operator", "Exists"}, {"tolerationSeconds", -5}}})), taints),
            std::chrono::seconds(0));
  EXPECT_EQ(noexecute_grace(pod(json::array()), json::array({parse_taint("c:NoSchedule", "t")})), std::nullopt);
}

// No scheduler of that name: the pod stays Pending with no condition, as on a cluster without Volcano, until one
// serves it.
TEST_F(SchedulingTest, AnotherSchedulersPodWaitsForThatScheduler) {
  ok({"apply", "-f", write_file("v.yaml", pod("v", "  schedulerName: volcano\n"))});
  ok({"apply", "-f", write_file("d.yaml", pod("d"))});
  ok({"wait", "--for=condition=Ready", "pod/d", "--timeout=10s"});  // the kubelet saw v first
  const json waiting = get_json({"get", "pod", "v", "-o", "json"});
  EXPECT_EQ(waiting["spec"].value("nodeName", ""), "");
  EXPECT_EQ(waiting["status"]["phase"], "Pending");
  EXPECT_FALSE(waiting["status"].contains("conditions")) << waiting["status"].dump();
  ok({"create", "--raw", "/_standin/kubelet", "-f",
      write_file("s.json", R"({"action":"serveScheduler","name":"volcano"})")});
  ok({"wait", "--for=condition=Ready", "pod/v", "--timeout=10s"});
}

TEST_F(SchedulingTest, TaintsKeepOutPodsThatDoNotTolerateThem) {
  ok({"taint", "nodes", "--all", "dedicated=infra:NoSchedule"});
  ok({"apply", "-f", write_file("p.yaml", pod("plain"))});
  EXPECT_EQ(scheduled_message("plain"), "0/4 nodes are available: 4 node(s) had untolerated taint {dedicated: infra}.");
  ok({"apply", "-f",
      write_file("t.yaml", pod("tolerant", "  tolerations: [{key: dedicated, operator: Equal, value: infra, "
                                           "effect: NoSchedule}]\n"))});
  ok({"wait", "--for=condition=Ready", "pod/tolerant", "--timeout=10s"});
  ok({"taint", "nodes", "--all", "dedicated-"});
  ok({"delete", "pod", "plain"});  // a scheduler retries on node changes; this one on pod events: re-create it
  ok({"apply", "-f", write_file("p.yaml", pod("plain"))});
  ok({"wait", "--for=condition=Ready", "pod/plain", "--timeout=10s"});
}

// Three of four nodes prefer no pods: a pod without the toleration goes to the fourth, however many it holds.
TEST_F(SchedulingTest, PreferNoScheduleTaintsSendPodsToTheNodeWithout) {
  const std::vector<std::string> nodes = {"node-0", "node-1", "node-2", "node-3"};
  for (size_t i = 0; i < 3; ++i) ok({"taint", "nodes", nodes[i], "spot=yes:PreferNoSchedule"});
  std::string all;
  for (int i = 0; i < 3; ++i) all += pod("p" + std::to_string(i)) + "---\n";
  ok({"apply", "-f", write_file("p.yaml", all)});
  ok({"wait", "--for=condition=Ready", "pod/p0", "pod/p1", "pod/p2", "--timeout=10s"});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(node_of("p" + std::to_string(i)), "node-3");
}

// kubectl taint ...:NoExecute: the pod that does not tolerate it goes at once with the taint manager's
// DisruptionTarget condition, the one that tolerates it for 1 s goes after that, the one that tolerates it stays.
TEST_F(SchedulingTest, NoExecuteTaintsEvictPodsAfterTheirTolerationSeconds) {
  const std::string forever = "  tolerations: [{key: gone, operator: Exists, effect: NoExecute}]\n";
  const std::string second = "  tolerations: [{key: gone, operator: Exists, effect: NoExecute, tolerationSeconds: 1}]\n";
  ok({"apply", "-f",
      write_file("p.yaml", pod("plain") + "---\n" + pod("forever", forever) + "---\n" + pod("second", second))});
  ok({"wait", "--for=condition=Ready", "pod/plain", "pod/forever", "pod/second", "--timeout=10s"});
  BackgroundKubectl conditions(*kubectl_, {"get", "pod", "plain", "-w", "-o",
                                           "jsonpath={.status.conditions[?(@.type==\"DisruptionTarget\")].reason}"
                                           " {.status.conditions[?(@.type==\"DisruptionTarget\")].message}{\"\\n\"}"});
  ASSERT_TRUE(conditions.wait_for_line(" ")) << "the watch printed no first state";  // watching before the taint
  const auto tainted = std::chrono::steady_clock::now();
  ok({"taint", "nodes", "--all", "gone=now:NoExecute"});
  EXPECT_TRUE(conditions.wait_for_line("DeletionByTaintManager Taint manager: deleting due to NoExecute taint"))
      << ::testing::PrintToString(conditions.lines());
  ok({"wait", "--for=delete", "pod/plain", "--timeout=10s"});
  ok({"wait", "--for=delete", "pod/second", "--timeout=10s"});
  EXPECT_GE(std::chrono::steady_clock::now() - tainted, std::chrono::seconds(1));
  EXPECT_EQ(get_json({"get", "pod", "forever", "-o", "json"})["status"].value("phase", ""), "Running");
}

TEST_F(SchedulingTest, RequiredNodeAffinityAndCpuRequests) {
  ok({"apply", "-f",
      write_file("a.yaml", pod("rack1",
                               "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
                               "        nodeSelectorTerms: [{matchExpressions: [{key: topology.torus.dev/rack, "
                               "operator: In, values: [rack-1]}]}]\n"))});
  ok({"wait", "--for=condition=Ready", "pod/rack1", "--timeout=10s"});
  const json node = get_json({"get", "node", node_of("rack1"), "-o", "json"});
  EXPECT_EQ(node["metadata"]["labels"].value("topology.torus.dev/rack", ""), "rack-1");
  ok({"apply", "-f", write_file("c.yaml", pod("big", "", "{requests: {cpu: \"100\"}}"))});  // nodes have 96
  EXPECT_EQ(scheduled_message("big"), "0/4 nodes are available: 4 Insufficient cpu.");
}

// One pod per node (the operator's whole-node GPU workers): the fifth of five finds no node.
TEST_F(SchedulingTest, RequiredPodAntiAffinitySpreadsOnePodPerNode) {
  std::string all;
  for (int i = 0; i < 5; ++i) {
    all += pod("w" + std::to_string(i),
               "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
               "      - {labelSelector: {matchLabels: {app: a}}, topologyKey: kubernetes.io/hostname}\n") +
           "---\n";
  }
  ok({"apply", "-f", write_file("w.yaml", all)});
  ok({"wait", "--for=condition=Ready", "pod/w0", "pod/w1", "pod/w2", "pod/w3", "--timeout=10s"});
  EXPECT_THAT(scheduled_message("w4"), HasSubstr("4 node(s) didn't match pod anti-affinity rules"));
  std::set<std::string> nodes;
  for (int i = 0; i < 4; ++i) nodes.insert(node_of("w" + std::to_string(i)));
  EXPECT_EQ(nodes.size(), 4u);
}

}  // namespace
}  // namespace torus::standin::testing

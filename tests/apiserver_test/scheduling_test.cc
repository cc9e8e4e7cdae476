// The simulated scheduler (tests/apiserver/scheduling.h) driven by the real kubectl: what kube-scheduler refuses,
// it refuses, in kube-scheduler's words; another scheduler's pods wait for that scheduler.
#include "tests/apiserver/scheduling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

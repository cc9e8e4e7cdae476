// The simulated kubelet: pods scheduled and run, terminated with exit codes, held Pending; via kubectl and the
// control endpoint.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using ::testing::HasSubstr;

class KubeletTest : public StandinTest {
 protected:
  std::string pod_yaml(const std::string& name, const std::string& restart_policy = "Never",
                       const std::string& extra_spec = "") {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name +
           "\n  labels: {job: a}\nspec:\n  restartPolicy: " + restart_policy + "\n" + extra_spec +
           "  containers: [{name: worker, image: torus-worker:1}]\n";
  }
};

TEST_F(KubeletTest, PodsAreScheduledAndRun) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0") + "---\n" + pod_yaml("p1"))});
  ok({"wait", "--for=condition=Ready", "pod/p0", "pod/p1", "--timeout=10s"});
  json pod = get_json({"get", "pod", "p0", "-o", "json"});
  EXPECT_EQ(pod["status"]["phase"], "Running");
  EXPECT_FALSE(pod["status"]["podIP"].get<std::string>().empty());
  EXPECT_EQ(pod["spec"]["nodeName"].get<std::string>().rfind("node-", 0), 0u);
  EXPECT_TRUE(pod["status"]["containerStatuses"][0]["state"].contains("running"));
  json nodes = get_json({"get", "nodes", "-l", "topology.torus.dev/rack=rack-1", "-o", "json"});
  EXPECT_EQ(nodes["items"].size(), 2u);
  EXPECT_NE(get_json({"get", "pod", "p1", "-o", "json"})["spec"]["nodeName"], pod["spec"]["nodeName"])
      << "pods spread over the least loaded nodes";
}

// Tests must never reach beyond this machine: every pod, host and node address the simulation hands out is
// loopback, and two pods never share one (they bind the same ports).
TEST_F(KubeletTest, EveryAddressIsLoopbackAndPodsDiffer) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0") + "---\n" + pod_yaml("p1"))});
  ok({"wait", "--for=condition=Ready", "pod/p0", "pod/p1", "--timeout=10s"});
  auto loopback = [](const std::string& ip) {
    in_addr a{};
    return ::inet_pton(AF_INET, ip.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
  };
  std::set<std::string> pod_ips;
  for (const char* name : {"p0", "p1"}) {
    json status = get_json({"get", "pod", name, "-o", "json"})["status"];
    EXPECT_TRUE(loopback(status["podIP"])) << status["podIP"];
    EXPECT_TRUE(loopback(status["hostIP"])) << status["hostIP"];
    EXPECT_EQ(status["podIPs"][0]["ip"], status["podIP"]);
    pod_ips.insert(status["podIP"].get<std::string>());
  }
  EXPECT_EQ(pod_ips.size(), 2u);
  for (const json& node : get_json({"get", "nodes", "-o", "json"})["items"]) {
    for (const json& a : node["status"]["addresses"]) {
      if (a["type"] == "InternalIP") {
        EXPECT_TRUE(loopback(a["address"])) << a["address"];
      }
    }
    EXPECT_EQ(node["spec"]["podCIDR"].get<std::string>().rfind("127.", 0), 0u) << node["spec"]["podCIDR"];
  }
}

TEST_F(KubeletTest, TerminatedContainerSetsPhaseAndExitCode) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0") + "---\n" + pod_yaml("ok"))});
  ok({"wait", "--for=condition=Ready", "pod/p0", "pod/ok", "--timeout=10s"});
  kubelet_->terminate("default", "p0", 137);
  ok({"create", "--raw", "/_standin/kubelet", "-f",
      write_file("t.json", R"({"action":"terminate","namespace":"default","name":"ok","exitCode":0})")});
  ok({"wait", "--for=jsonpath={.status.phase}=Failed", "pod/p0", "--timeout=10s"});
  ok({"wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/ok", "--timeout=10s"});
  json failed = get_json({"get", "pod", "p0", "-o", "json"});
  EXPECT_EQ(failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137);
  EXPECT_EQ(failed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "Error");
  EXPECT_THAT(ok({"get", "pods"}), HasSubstr("Completed"));
}

TEST_F(KubeletTest, RestartPolicyAlwaysRestartsTheContainer) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0", "Always"))});
  ok({"wait", "--for=condition=Ready", "pod/p0", "--timeout=10s"});
  kubelet_->terminate("default", "p0", 1);
  json pod = get_json({"get", "pod", "p0", "-o", "json"});
  EXPECT_EQ(pod["status"]["phase"], "Running");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["restartCount"], 1);
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 1);
}

TEST_F(KubeletTest, HeldPodsStayUnschedulableUntilReleased) {
  kubelet_->hold_pending("default", "p0");
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0"))});
  ok({"wait", "--for=jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}=Unschedulable", "pod/p0",
      "--timeout=10s"});
  json pod = get_json({"get", "pod", "p0", "-o", "json"});
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_FALSE(pod["spec"].contains("nodeName"));
  kubelet_->release("default", "p0");
  ok({"wait", "--for=condition=Ready", "pod/p0", "--timeout=10s"});
}

// The start gate: pods the hold matches are bound (PodScheduled True, a node) but stay Pending until release.
TEST_F(KubeletTest, StartHeldPodsAreBoundButPendingUntilReleased) {
  kubelet_->hold_start("default", LabelSelector::parse("gate=shut"));
  std::string gated = pod_yaml("p0");
  const std::string labels = "labels: {job: a}";
  gated.replace(gated.find(labels), labels.size(), "labels: {job: a, gate: shut}");
  ok({"apply", "-f", write_file("p.yaml", gated + "---\n" + pod_yaml("p1"))});
  ok({"wait", "--for=condition=Ready", "pod/p1", "--timeout=10s"});            // not matched: started
  ok({"wait", "--for=jsonpath={.spec.nodeName}", "pod/p0", "--timeout=10s"});  // bound
  json pod = get_json({"get", "pod", "p0", "-o", "json"});
  EXPECT_EQ(pod["status"]["phase"], "Pending") << pod.dump();
  EXPECT_FALSE(pod["spec"].value("nodeName", "").empty()) << pod.dump();
  kubelet_->release_all();
  ok({"wait", "--for=condition=Ready", "pod/p0", "--timeout=10s"});
}

TEST_F(KubeletTest, GpuCapacityAndNodeSelectorsDecidePlacement) {
  std::string gpu_pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  restartPolicy: Never\n"
      "  nodeSelector: {topology.torus.dev/rack: rack-0}\n  containers: [{name: w, image: i:1, "
      "resources: {limits: {nvidia.com/gpu: 8}}}]\n";
  std::string all;
  for (int i = 0; i < 3; ++i) {
    std::string p = gpu_pod;
    p.replace(p.find("NAME"), 4, "g" + std::to_string(i));
    all += p + "---\n";
  }
  ok({"apply", "-f", write_file("g.yaml", all)});
  ok({"wait", "--for=condition=Ready", "pod/g0", "pod/g1", "--timeout=10s"});
  ok({"wait", "--for=jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}=Unschedulable", "pod/g2",
      "--timeout=10s"});
  // Freeing a node lets the third pod in.
  ok({"delete", "pod", "g0"});
  ok({"wait", "--for=condition=Ready", "pod/g2", "--timeout=10s"});
}

TEST_F(KubeletTest, DeletionIsGracefulAndFinishedByTheKubelet) {
  ok({"apply", "-f", write_file("p.yaml", pod_yaml("p0"))});
  ok({"wait", "--for=condition=Ready", "pod/p0", "--timeout=10s"});
  WatchClient watch(server_->port(), "/api/v1/namespaces/default/pods?watch=1&resourceVersion=" +
                                         std::to_string(server_->store().resource_version()));
  ok({"delete", "pod", "p0", "--timeout=10s"});
  auto events = watch.until("DELETED");
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front()["type"], "MODIFIED");
  EXPECT_TRUE(events.front()["object"]["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(events.back()["type"], "DELETED");
}

}  // namespace
}  // namespace torus::standin::testing

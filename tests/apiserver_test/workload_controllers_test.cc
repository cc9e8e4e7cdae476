// The stand-in's kube-controller-manager part (tests/apiserver/workload_controllers.h), driven by the real kubectl:
// a Deployment runs its replicas through a ReplicaSet, a deleted pod is replaced, a new template rolls out.
#include "tests/apiserver/workload_controllers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using namespace std::chrono_literals;

class WorkloadControllersTest : public StandinTest {
 protected:
  void SetUp() override {
    StandinTest::SetUp();
    controllers_ = std::make_unique<WorkloadControllers>(server_->store());
  }
  void TearDown() override {
    controllers_.reset();
    StandinTest::TearDown();
  }

  std::string deployment_yaml(const std::string& env_value) {
    return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n"
           "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n"
           "      containers: [{name: main, image: web:1, env: [{name: V, value: \"" +
           env_value + "\"}]}]\n";
  }
  // The pods the ReplicaSets run (not being deleted), by name.
  std::set<std::string> live_pods() {
    std::set<std::string> names;
    const json list = get_json({"get", "pods", "-l", "app=web", "-o", "json"});
    for (const json& pod : list["items"]) {
      if (!pod["metadata"].contains("deletionTimestamp")) names.insert(pod["metadata"]["name"].get<std::string>());
    }
    return names;
  }
  // Checks `done` each time the store changes (each kubectl answer is a fresh look), until `timeout`.
  bool eventually(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(100ms);  // polling a condition: no event tells this test when it holds
    }
    return true;
  }

  std::unique_ptr<WorkloadControllers> controllers_;
};

TEST(PodTemplateHash, IsStableAndFollowsTheTemplate) {
  const json a = {{"spec", {{"containers", {{{"name", "main"}, {"image", "web:1"}}}}}}};
  json b = a;
  b["spec"]["containers"][0]["image"] = "web:2";
  EXPECT_EQ(pod_template_hash(a), pod_template_hash(a));
  EXPECT_NE(pod_template_hash(a), pod_template_hash(b));
  EXPECT_EQ(pod_template_hash(a).find_first_not_of("bcdfghjklmnpqrstvwxz2456789"), std::string::npos);
}

TEST_F(WorkloadControllersTest, ADeploymentRunsItsReplicasThroughAReplicaSet) {
  ok({"apply", "-f", write_file("d.yaml", deployment_yaml("1"))});
  ok({"rollout", "status", "deployment/web", "--timeout=30s"});
  const json sets = get_json({"get", "replicasets", "-o", "json"})["items"];
  ASSERT_EQ(sets.size(), 1u);
  const json& rs = sets[0];
  const std::string hash = rs["metadata"]["labels"]["pod-template-hash"];
  EXPECT_EQ(rs["metadata"]["name"], "web-" + hash);
  EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
  EXPECT_EQ(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1");
  const std::set<std::string> pods = live_pods();
  ASSERT_EQ(pods.size(), 2u) << ok({"get", "pods", "--show-labels"});
  for (const std::string& name : pods) {
    EXPECT_EQ(name.rfind("web-" + hash + "-", 0), 0u) << name;
    const json pod = get_json({"get", "pod", name, "-o", "json"});
    EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["name"], rs["metadata"]["name"]);
    EXPECT_EQ(pod["status"]["phase"], "Running");
  }
  const json status = get_json({"get", "deployment", "web", "-o", "json"})["status"];
  EXPECT_EQ(status["availableReplicas"], 2);
  EXPECT_EQ(status["updatedReplicas"], 2);
  EXPECT_EQ(status["conditions"][0]["type"], "Available");
  EXPECT_EQ(status["conditions"][0]["status"], "True");
}

TEST_F(WorkloadControllersTest, ADeletedPodIsReplaced) {
  ok({"apply", "-f", write_file("d.yaml", deployment_yaml("1"))});
  ok({"rollout", "status", "deployment/web", "--timeout=30s"});
  const std::set<std::string> before = live_pods();
  ASSERT_EQ(before.size(), 2u);
  const std::string gone = *before.begin();
  ok({"delete", "pod", gone, "--wait=true", "--timeout=30s"});
  ASSERT_TRUE(eventually(
      [&] {
        const std::set<std::string> now = live_pods();
        return now.size() == 2 && !now.count(gone);
      },
      30s))
      << "pods: " << ok({"get", "pods", "-o", "wide"});
}

TEST_F(WorkloadControllersTest, ANewTemplateRollsToANewReplicaSet) {
  ok({"apply", "-f", write_file("d.yaml", deployment_yaml("1"))});
  ok({"rollout", "status", "deployment/web", "--timeout=30s"});
  const std::string first = get_json({"get", "replicasets", "-o", "json"})["items"][0]["metadata"]["name"];
  ok({"apply", "-f", write_file("d2.yaml", deployment_yaml("2"))});
  ok({"rollout", "status", "deployment/web", "--timeout=30s"});
  ASSERT_TRUE(eventually([&] { return live_pods().size() == 2; }, 30s)) << ok({"get", "pods"});
  std::string second;
  const json sets = get_json({"get", "replicasets", "-o", "json"});
  for (const json& rs : sets["items"]) {
    const std::string name = rs["metadata"]["name"];
    if (name == first) {
      EXPECT_EQ(rs["spec"]["replicas"], 0) << "the old ReplicaSet is scaled down, kept for a rollback";
    } else {
      second = name;
      EXPECT_EQ(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "2");
    }
  }
  ASSERT_FALSE(second.empty());
  for (const std::string& pod : live_pods()) EXPECT_EQ(pod.rfind(second + "-", 0), 0u) << pod;
}

}  // namespace
}  // namespace torus::standin::testing

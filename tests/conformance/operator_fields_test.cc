// The fields only the operator acts on, through the operator's planner (the pure function its reconciler applies to
// the cluster): each field given a non-default value shows up in the pods, service or PodGroup it plans.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

const json* first_created(const Plan& p, ChildKind kind) {
  for (const auto& c : p.creates)
    if (c.kind == kind) return &c.object;
  return nullptr;
}

std::map<std::string, std::string> env_of(const json& container) {
  std::map<std::string, std::string> env;
  for (const auto& e : container["env"]) env[e["name"]] = e.value("value", "<ref>");
  return env;
}

TEST(OperatorConformance, ImageAndPortsReachThePodsAndTheService) {
  json job = JobBuilder("ports").build();
  job["spec"]["gang"]["image"] = "registry.example/torus-worker:test";
  job["spec"]["metricsPort"] = 9411;
  job["spec"]["rendezvousPort"] = 29611;
  PlanInput in = with_children(job, {}, at(0));
  in.services.clear();  // let the planner create the service too
  const Plan p = plan(in);
  ASSERT_TRUE(p.invalid_spec.empty()) << p.invalid_spec;
  const json* pod = first_created(p, ChildKind::kPod);
  ASSERT_NE(pod, nullptr);
  const json& container = (*pod)["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "registry.example/torus-worker:test");
  const auto env = env_of(container);
  EXPECT_EQ(env.at("MASTER_PORT"), "29611");
  EXPECT_EQ(env.at("TORUS_METRICS_PORT"), "9411");
  std::map<std::string, int> ports;
  for (const auto& port : container["ports"]) ports[port["name"]] = port["containerPort"];
  EXPECT_EQ(ports, (std::map<std::string, int>{{"metrics", 9411}, {"rendezvous", 29611}}));
  const json* service = first_created(p, ChildKind::kService);
  ASSERT_NE(service, nullptr);
  std::map<std::string, int> service_ports;
  for (const auto& port : (*service)["spec"]["ports"]) service_ports[port["name"]] = port["port"];
  EXPECT_EQ(service_ports, (std::map<std::string, int>{{"metrics", 9411}, {"rendezvous", 29611}}));
}

TEST(OperatorConformance, PriorityClassReachesThePods) {
  const Plan p = plan(with_children(
      JobBuilder("prio").scheduling({{"schedulerName", "volcano"}, {"priorityClass", "high"}}).build(), {}, at(0)));
  ASSERT_TRUE(p.invalid_spec.empty()) << p.invalid_spec;
  const json* pod = first_created(p, ChildKind::kPod);
  ASSERT_NE(pod, nullptr);
  EXPECT_EQ((*pod)["spec"]["priorityClassName"], "high");
}

}  // namespace
}  // namespace torus::controller

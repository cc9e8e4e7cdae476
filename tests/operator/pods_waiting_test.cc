// pods_waiting.h and the planner's PodsWaiting condition: a gang whose pods cannot start says why (the kubelet's
// waiting reason, the pod and its message; an admission refusal of a create), stays Pending rather than failing, and
// the condition clears once every pod exists and none waits for a fix.
#include "operator/controller/pods_waiting.h"

#include <gtest/gtest.h>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller::testing {
namespace {

const json* condition_of(const Plan& p, const std::string& type) {
  if (!p.status) return nullptr;
  for (const json& c : (*p.status)["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

TEST(PodsWaiting, OnlyTheKubeletsReasonsThatNeedAFixCount) {
  for (const char* reason : {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                             "CreateContainerConfigError", "CreateContainerError"}) {
    EXPECT_TRUE(needs_a_fix(reason)) << reason;
  }
  for (const char* reason : {"ContainerCreating", "PodInitializing", "CrashLoopBackOff", ""}) {
    EXPECT_FALSE(needs_a_fix(reason)) << reason;
  }
}

TEST(PodsWaiting, AWorkerWhoseImageCannotBePulledNamesThePodAndTheImage) {
  const std::string pull =
      "Back-off pulling image \"ghcr.io/torus-dev/torus-worker:nosuch\": ErrImagePull: rpc error: code = NotFound";
  const PlanInput in = with_children(JobBuilder().phase("Pending").build(),
                                     {PodBuilder("mnist", 0).waiting("ContainerCreating", "").build(),
                                      PodBuilder("mnist", 1).waiting("ImagePullBackOff", pull).build()},
                                     at(5));
  const Plan p = plan(in);
  EXPECT_EQ(phase_of(p, in), "Pending");
  const json* c = condition_of(p, "PodsWaiting");
  ASSERT_NE(c, nullptr) << (p.status ? p.status->dump() : "no status");
  EXPECT_EQ((*c)["status"], "True");
  EXPECT_EQ((*c)["reason"], "ImagePullBackOff");
  EXPECT_EQ((*c)["message"], "pod mnist-worker-1: " + pull);
}

TEST(PodsWaiting, TheConditionClearsOnceEveryPodRuns) {
  const json job = JobBuilder().phase("Pending").condition("PodsWaiting", "True", 2).build();
  const PlanInput in =
      with_children(job, {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(5));
  const Plan p = plan(in);
  const json* c = condition_of(p, "PodsWaiting");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "False");
  EXPECT_EQ((*c)["reason"], "PodsStarted");
}

// A create that admission refuses (403: Pod Security, an unknown PriorityClass): the job waits, named, and the pass
// makes nothing more; it is not failed (the namespace's policy may change), unlike a 422.
TEST(PodsWaiting, ACreateRefusedByAdmissionKeepsTheJobPendingWithTheServersMessage) {
  PlanInput in =
      with_children(JobBuilder().phase("Pending").build(), {PodBuilder("mnist", 0).running().build()}, at(5));
  const std::string forbidden =
      "pods \"mnist-worker-1\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true";
  in.refused_child =
      RefusedChild{ChildKind::kPod, "mnist-worker-1", 403, forbidden, RefusedChild::Refusal::kByAdmission};
  const Plan p = plan(in);
  EXPECT_EQ(phase_of(p, in), "Pending");
  EXPECT_EQ(condition_reason(p, "Failed"), "<none>");
  EXPECT_TRUE(created_pods(p).empty());
  const json* c = condition_of(p, "PodsWaiting");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["reason"], "FailedCreate");
  EXPECT_EQ((*c)["message"], "Pod mnist-worker-1: " + forbidden);
}

}  // namespace
}  // namespace torus::controller::testing

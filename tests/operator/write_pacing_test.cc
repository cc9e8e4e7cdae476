// Create expectations and status pacing (operator/controller/write_pacing.h): pure, on a fake clock.
#include "operator/controller/write_pacing.h"

#include <gtest/gtest.h>

namespace torus::controller {
namespace {

using namespace std::chrono_literals;

json named(const std::string& name) { return {{"metadata", {{"name", name}}}}; }

Plan creating(const std::vector<std::string>& pods) {
  Plan plan;
  plan.creates.push_back({ChildKind::kPodGroup, named("j")});
  for (const auto& p : pods) plan.creates.push_back({ChildKind::kPod, named(p)});
  return plan;
}

std::vector<std::string> created_names(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& c : plan.creates)
    out.push_back(std::string(to_string(c.kind)) + "/" + c.object["metadata"]["name"].get<std::string>());
  return out;
}

TEST(CreateExpectations, AChildCreatedButNotYetCachedIsNotCreatedAgain) {
  CreateExpectations e(30s);
  const TimePoint t0{};
  for (const auto& c : creating({"w-0", "w-1"}).creates) e.created("ns/j", c, t0);
  PlanInput in{};
  in.now = t0 + 1s;
  in.pods = objects_of({named("w-0")});  // the watch has brought w-0 only
  Plan again = creating({"w-1"});
  e.filter("ns/j", in, again);
  EXPECT_TRUE(again.creates.empty()) << "w-1 is on its way, and a PodGroup goes with its pods";
  // w-0 seen: its expectation ended, so w-0 deleted later is created again.
  Plan after_delete = creating({"w-0"});
  in.pods = {};
  e.filter("ns/j", in, after_delete);
  EXPECT_EQ(created_names(after_delete), (std::vector<std::string>{"PodGroup/j", "Pod/w-0"}));
}

TEST(CreateExpectations, AnExpectationNeverMetEndsAfterItsTtl) {
  CreateExpectations e(30s);
  const TimePoint t0{};
  e.created("ns/j", {ChildKind::kPod, named("w-0")}, t0);
  PlanInput in{};
  in.now = t0 + 31s;
  Plan plan = creating({"w-0"});
  e.filter("ns/j", in, plan);
  EXPECT_EQ(created_names(plan), (std::vector<std::string>{"PodGroup/j", "Pod/w-0"}));
  Plan other = creating({"w-0"});
  e.filter("ns/other", in, other);
  EXPECT_EQ(other.creates.size(), 2u) << "expectations are per job";
}

json job_with(const json& status) { return {{"metadata", {{"name", "j"}}}, {"status", status}}; }

TEST(StatusPacing, WorkerCountsWaitForTheWindowAndRememberedChangesDoNot) {
  StatusPacing pacing(1s);
  const TimePoint t0{};
  const json before = {{"phase", "Pending"}, {"workers", {{"active", 0}}}};
  Plan counts;
  counts.status = json{{"phase", "Pending"}, {"workers", {{"active", 3}}}, {"ranks", json::array()}};
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), counts, t0), std::nullopt) << "nothing written yet";
  pacing.wrote("ns/j", t0);
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), counts, t0 + 200ms), std::optional(1s));
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), counts, t0 + 1s), std::nullopt) << "the window has passed";
  Plan running;
  running.status = json{{"phase", "Running"}, {"workers", {{"active", 8}}}};
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), running, t0 + 200ms), std::nullopt) << "the phase is memory";
  Plan with_event = counts;
  with_event.events.push_back({EventType::kNormal, "X", "y"});
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), with_event, t0 + 200ms), std::nullopt);
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), Plan{}, t0 + 200ms), std::nullopt) << "no status to write";
  pacing.forget("ns/j");
  EXPECT_EQ(pacing.defer("ns/j", job_with(before), counts, t0 + 200ms), std::nullopt);
}


// A new job's accepted status waits for its gang, past the creates of its first pass, for the accepted window from
// that pass: a gang that runs in that time makes one write (Running); one that does not is shown Pending after it.
TEST(StatusPacing, ANewJobsAcceptedStatusWaitsForItsGang) {
  StatusPacing pacing(1s, 3s);
  const TimePoint t0{};
  const json fresh = {{"metadata", {{"name", "j"}}}, {"spec", json::object()}};  // no status yet
  Plan first = creating({"w-0", "w-1"});
  first.status = json{{"phase", "Pending"}, {"startTime", "t0"}};
  EXPECT_FALSE(pacing.accepting("ns/j"));
  EXPECT_EQ(pacing.defer("ns/j", fresh, first, t0), std::optional(3s)) << "the creates go, the status waits";
  EXPECT_TRUE(pacing.accepting("ns/j")) << "acted on without a status";
  Plan pending;
  pending.status = json{{"phase", "Pending"}, {"startTime", "t0"}, {"workers", {{"active", 2}}}};
  EXPECT_EQ(pacing.defer("ns/j", fresh, pending, t0 + 1200ms), std::optional(2s)) << "measured from the first pass";
  Plan running;
  running.status = json{{"phase", "Running"}, {"startTime", "t0"}, {"workers", {{"active", 2}}}};
  EXPECT_EQ(pacing.defer("ns/j", fresh, running, t0 + 1500ms), std::nullopt) << "the gang runs: written at once";
  EXPECT_EQ(pacing.defer("ns/j", fresh, pending, t0 + 3s), std::nullopt) << "no gang in 3 s: shown Pending";
  pacing.wrote("ns/j", t0 + 3s);
  EXPECT_FALSE(pacing.accepting("ns/j"));
  Plan failed;  // refused at once: what a pass must say (here an event) is never held back
  failed.status = json{{"phase", "Pending"}};
  failed.events.push_back({EventType::kWarning, "FailedCreate", "403"});
  EXPECT_EQ(pacing.defer("ns/k", fresh, failed, t0), std::nullopt);
  EXPECT_FALSE(pacing.accepting("ns/k"));
  pacing.forget("ns/j");
  EXPECT_FALSE(pacing.accepting("ns/j"));
}

}  // namespace
}  // namespace torus::controller

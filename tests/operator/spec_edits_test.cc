// Spec edits and attempts (operator/controller/spec_edits.h): which fields an attempt is bound to, and what the
// planner does when they are edited: a new attempt from the last checkpoint, never a failure; the job file of each
// attempt is the spec of the moment its pods are created; observedGeneration names the spec the pods run.
#include "operator/controller/spec_edits.h"

#include <gtest/gtest.h>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

// The ConfigMap and the pods of attempt `attempt` as the operator made them from `job`'s spec.
json config_map_of(const json& job, int attempt) { return build_config_map(defaulted(job), attempt); }
json pod_of(const json& job, int index, int attempt) {
  return PodBuilder(job["metadata"]["name"], index, attempt)
      .running("node-" + std::to_string(index))
      .annotate(std::string(kAnnotationSpecHash), spec_hash_of(job))
      .build();
}

PlanInput input(const json& job, std::vector<json> pods, const json& config_map, int now) {
  PlanInput in = with_children(job, std::move(pods), at(now));
  in.config_maps = objects_of({config_map});
  return in;
}

TEST(SpecEdits, LiveRunPolicyFieldsAreNotPartOfTheAttempt) {
  const json spec = {{"gang", {{"workers", 2}}},
                     {"runPolicy", {{"suspend", false}, {"backoffLimit", 3}, {"topology", {{"key", "rack"}}}}}};
  json suspended = spec;
  suspended["runPolicy"]["suspend"] = true;
  suspended["runPolicy"]["backoffLimit"] = 0;
  suspended["runPolicy"]["activeDeadlineSeconds"] = 60;
  EXPECT_EQ(attempt_spec(suspended),
            (json{{"gang", {{"workers", 2}}}, {"runPolicy", {{"topology", {{"key", "rack"}}}}}}));
  EXPECT_EQ(attempt_spec_hash(suspended), attempt_spec_hash(spec));
  json scaled = spec;
  scaled["gang"]["workers"] = 3;
  EXPECT_NE(attempt_spec_hash(scaled), attempt_spec_hash(spec));
  EXPECT_EQ(attempt_spec_hash(spec).size(), 16u);
}

TEST(SpecEdits, ChangedFieldsNameEachLeaf) {
  const json before = {{"gang", {{"workers", 2}}}, {"training", {{"epochs", 1}}}, {"runPolicy", {{"suspend", true}}}};
  const json after = {
      {"gang", {{"workers", 4}}}, {"training", {{"epochs", 3}, {"seed", 7}}}, {"runPolicy", {{"suspend", false}}}};
  EXPECT_EQ(changed_fields(before, after),
            (std::vector<std::string>{"spec.gang.workers: 2 -> 4", "spec.training.epochs: 1 -> 3",
                                      "spec.training.seed: unset -> 7"}));
  EXPECT_EQ(changed_fields(before, after, 1),
            (std::vector<std::string>{"spec.gang.workers: 2 -> 4", "... and 2 more"}));
  EXPECT_TRUE(changed_fields(before, before).empty());
}

struct EditCase {
  const char* name;
  int from_workers;
  int to_workers;
};

class GangShapeEdit : public ::testing::TestWithParam<EditCase> {};

// Scale up (2 -> 3) and down (3 -> 2) of a running gang, even with backoffLimit 0: the pods of attempt 0 go, and
// once they are gone attempt 1 starts with the new shape: its job file, WORLD_SIZE and observedGeneration agree.
TEST_P(GangShapeEdit, IsANewAttemptNotAFailure) {
  const EditCase& c = GetParam();
  json before =
      JobBuilder().workers(c.from_workers).backoff_limit(0).phase("Running").condition("Running", "True", 3).build();
  before["spec"]["training"]["batchSize"] = 64 * 3;  // divisible by 2 and 3: valid both ways
  std::vector<json> pods;
  for (int i = 0; i < c.from_workers; ++i) pods.push_back(pod_of(before, i, 0));
  json edited = before;
  edited["spec"]["gang"]["workers"] = c.to_workers;
  edited["metadata"]["generation"] = 2;
  const json old_config_map = config_map_of(before, 0);

  Plan teardown = plan(input(edited, pods, old_config_map, 10));
  ASSERT_TRUE(teardown.status);
  const json& s = *teardown.status;
  EXPECT_EQ(s["phase"], "Restarting");
  EXPECT_EQ(s["attempt"], 1);
  EXPECT_EQ(s["restarts"], 0) << "an edit is not a failure";
  EXPECT_EQ(s["observedGeneration"], 1) << "the pods still run generation 1";
  EXPECT_EQ(condition_reason(teardown, "Restarting"), "SpecChanged");
  EXPECT_EQ(condition_reason(teardown, "Failed"), "<none>");
  EXPECT_EQ(teardown.deletes.size(), static_cast<size_t>(c.from_workers));
  EXPECT_TRUE(teardown.creates.empty());
  ASSERT_FALSE(teardown.events.empty());
  EXPECT_EQ(teardown.events.back().type, EventType::kNormal);
  EXPECT_EQ(teardown.events.back().reason, "SpecChanged");
  EXPECT_NE(teardown.events.back().message.find("spec.gang.workers: " + std::to_string(c.from_workers) + " -> " +
                                                std::to_string(c.to_workers)),
            std::string::npos)
      << teardown.events.back().message;

  json restarting = edited;
  restarting["status"] = s;
  Plan next = plan(input(restarting, {}, old_config_map, 12));
  ASSERT_EQ(next.updates.size(), 1u);
  const json& cm = next.updates[0].object;
  EXPECT_EQ(cm["metadata"]["annotations"][std::string(kAnnotationGeneration)], "2");
  const json file = json::parse(cm["data"]["job.json"].get<std::string>());
  EXPECT_EQ(file["spec"]["gang"]["workers"], c.to_workers);
  int pods_created = 0;
  for (const auto& create : next.creates) {
    if (create.kind != ChildKind::kPod) continue;
    ++pods_created;
    EXPECT_EQ(env_of(create.object)["WORLD_SIZE"], std::to_string(c.to_workers));
    EXPECT_EQ(env_of(create.object)["TORUS_ATTEMPT"], "1");
    EXPECT_EQ(create.object["metadata"]["annotations"][std::string(kAnnotationSpecHash)],
              cm["metadata"]["annotations"][std::string(kAnnotationSpecHash)]);
  }
  EXPECT_EQ(pods_created, c.to_workers);
  ASSERT_TRUE(next.status);
  EXPECT_EQ((*next.status)["observedGeneration"], 2);
}

INSTANTIATE_TEST_SUITE_P(BothDirections, GangShapeEdit, ::testing::Values(EditCase{"up", 2, 3}, EditCase{"down", 3, 2}),
                         [](const ::testing::TestParamInfo<EditCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

// An edit of the model or the seed on a running job: the checkpoints of its run no longer fit, so the next attempt
// is a new run from step 0 (status.run, its pods' TORUS_RUN_ID; the old run's lastCheckpoint is dropped, so no pod is
// told to find it), said in the event; a shape edit stays the same run.
TEST(SpecEdits, AModelOrSeedEditStartsANewRunThatSaysSo) {
  for (const char* field : {"seed", "widths"}) {
    SCOPED_TRACE(field);
    json before = JobBuilder().phase("Running").condition("Running", "True", 3).build();
    before["metadata"]["uid"] = "u-1";
    before["status"]["lastCheckpoint"] = {{"path", "/ckpt/u-1/ckpt-40.torus"}, {"step", 40}};
    std::vector<json> pods = {pod_of(before, 0, 0), pod_of(before, 1, 0)};
    json edited = before;
    if (std::string(field) == "seed") edited["spec"]["training"]["seed"] = 7;
    if (std::string(field) == "widths") edited["spec"]["model"]["widths"] = {8, 16, 32, 64};
    edited["metadata"]["generation"] = 2;
    const json old_config_map = config_map_of(before, 0);
    Plan teardown = plan(input(edited, pods, old_config_map, 10));
    ASSERT_TRUE(teardown.status);
    EXPECT_EQ((*teardown.status).value("run", ""), "u-1-g2");
    EXPECT_FALSE(teardown.status->contains("lastCheckpoint")) << teardown.status->dump();
    ASSERT_FALSE(teardown.events.empty());
    EXPECT_NE(teardown.events.back().message.find("restarting the gang as attempt 1 as a new run u-1-g2 from step 0 "
                                                  "(the model or the seed changed: the checkpoints do not fit)"),
              std::string::npos)
        << teardown.events.back().message;
    json restarting = edited;
    restarting["status"] = *teardown.status;
    Plan next = plan(input(restarting, {}, old_config_map, 12));
    for (const auto& create : next.creates) {
      if (create.kind != ChildKind::kPod) continue;
      EXPECT_EQ(env_of(create.object)["TORUS_RUN_ID"], "u-1-g2");
      EXPECT_EQ(env_of(create.object).count("TORUS_RESUME_STEP"), 0u) << "the new run has no checkpoint to find";
    }
  }
  EXPECT_FALSE(edit_starts_a_new_run(json{{"gang", {{"workers", 2}}}, {"training", {{"seed", 1}}}},
                                     json{{"gang", {{"workers", 3}}}, {"training", {{"seed", 1}}}}));
}

// Fields the planner reads on every pass apply at once: no attempt, no pod deleted, the generation is observed.
TEST(SpecEdits, LiveFieldEditsApplyAtOnce) {
  const json running = JobBuilder().phase("Running").condition("Running", "True", 3).build();
  const std::vector<json> pods = {pod_of(running, 0, 0), pod_of(running, 1, 0)};
  json edited = running;
  edited["spec"]["runPolicy"]["backoffLimit"] = 7;
  edited["spec"]["runPolicy"]["activeDeadlineSeconds"] = 3600;
  edited["metadata"]["generation"] = 2;
  Plan p = plan(input(edited, pods, config_map_of(running, 0), 10));
  EXPECT_TRUE(p.deletes.empty());
  EXPECT_TRUE(p.creates.empty());
  EXPECT_TRUE(p.updates.empty());
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["observedGeneration"], 2);
  EXPECT_EQ((*p.status)["attempt"], 0);
}

// Issue 13's case: suspend, edit epochs 1 -> 3 and workers 2 -> 4, resume: the new attempt mounts the new spec.
TEST(SpecEdits, ResumeMountsTheSpecOfThatMoment) {
  const json running = JobBuilder().phase("Running").condition("Running", "True", 3).build();
  json suspending = running;
  suspending["spec"]["runPolicy"]["suspend"] = true;
  Plan s = plan(input(suspending, {pod_of(running, 0, 0), pod_of(running, 1, 0)}, config_map_of(running, 0), 10));
  ASSERT_TRUE(s.status);
  EXPECT_EQ((*s.status)["phase"], "Suspended");
  EXPECT_EQ(s.deletes.size(), 2u);

  json resumed = JobBuilder().workers(4).epochs(3).generation(3).build();
  resumed["status"] = *s.status;
  Plan r = plan(input(resumed, {}, config_map_of(running, 0), 20));
  ASSERT_TRUE(r.status);
  EXPECT_EQ((*r.status)["attempt"], 1);
  EXPECT_EQ((*r.status)["restarts"], 0);
  EXPECT_EQ((*r.status)["observedGeneration"], 3);
  ASSERT_EQ(r.updates.size(), 1u);
  const json file = json::parse(r.updates[0].object["data"]["job.json"].get<std::string>());
  EXPECT_EQ(file["spec"]["gang"]["workers"], 4);
  EXPECT_EQ(file["spec"]["training"]["epochs"], 3);
  int created = 0;
  for (const auto& c : r.creates) {
    if (c.kind != ChildKind::kPod) continue;
    ++created;
    EXPECT_EQ(env_of(c.object)["WORLD_SIZE"], "4");
    EXPECT_EQ(c.object["metadata"]["labels"][std::string(kLabelAttempt)], "1");
  }
  EXPECT_EQ(created, 4);
}

// A job created suspended has had no attempt yet: resuming starts attempt 0.
TEST(SpecEdits, AJobCreatedSuspendedStartsAtAttemptZero) {
  json job = JobBuilder().suspend(true).build();
  Plan s = plan(input(job, {}, config_map_of(job, 0), 0));
  ASSERT_TRUE(s.status);
  EXPECT_EQ((*s.status)["phase"], "Suspended");
  job["spec"]["runPolicy"]["suspend"] = false;
  job["status"] = *s.status;
  Plan r = plan(input(job, {}, config_map_of(job, 0), 5));
  ASSERT_TRUE(r.status);
  EXPECT_EQ((*r.status)["attempt"], 0);
  EXPECT_TRUE(r.updates.empty()) << "the ConfigMap already holds this spec";
}

// Pods made by an operator that did not annotate them are taken as current: an upgrade restarts no gang.
TEST(SpecEdits, UnannotatedPodsAreNotRestarted) {
  const json running = JobBuilder().phase("Running").condition("Running", "True", 3).build();
  Plan p = plan(input(running, {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()},
                      config_map_of(running, 0), 10));
  EXPECT_TRUE(p.deletes.empty());
  EXPECT_TRUE(p.creates.empty());
}

}  // namespace
}  // namespace torus::controller

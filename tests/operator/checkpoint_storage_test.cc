// The checkpoint storage contract (operator/controller/checkpoint_storage.h): a job that restarts keeps its
// checkpoints on a volume that outlives pods, or the operator makes one from volumeClaimTemplate; otherwise it is
// refused before any pod is made, the field named.
#include "operator/controller/checkpoint_storage.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/api/validation.h"
#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

json without_template(json job) {
  job["spec"]["gang"].erase("template");
  return job;
}

const json* first_created(const Plan& p, ChildKind kind) {
  for (const auto& c : p.creates) {
    if (c.kind == kind) return &c.object;
  }
  return nullptr;
}

std::string failure_message(const Plan& p) {
  if (!p.status) return "";
  for (const auto& c : p.status->value("conditions", json::array())) {
    if (c["type"] == "Failed" && c["status"] == "True") return c.value("message", "");
  }
  return "";
}

TEST(CheckpointStorage, ADirOnNoVolumeIsRefusedBeforeAnyPodWithTheFieldNamed) {
  const Plan p = plan(with_children(without_template(JobBuilder().build()), {}, at(0)));
  EXPECT_EQ(condition_reason(p, "Failed"), "InvalidSpec");
  EXPECT_NE(failure_message(p).find("spec.training.checkpoint.dir: \"/ckpt\" is on no volume"), std::string::npos)
      << failure_message(p);
  EXPECT_EQ(first_created(p, ChildKind::kPod), nullptr);
  EXPECT_EQ(condition_reason(p, "Created"), "<none>") << "a refused job was not accepted";
}

TEST(CheckpointStorage, AnEmptyDirOrAReadOnlyMountIsNoPlaceForCheckpoints) {
  for (const json& volume : {json{{"name", "ckpt"}, {"emptyDir", json::object()}},
                             json{{"name", "ckpt"}, {"persistentVolumeClaim", {{"claimName", "c"}}}}}) {
    const bool read_only = volume.contains("persistentVolumeClaim");
    json job = without_template(JobBuilder().build());
    job["spec"]["gang"]["template"]["spec"] = {
        {"volumes", {volume}},
        {"containers",
         {{{"name", "worker"}, {"volumeMounts", {{{"name", "ckpt"}, {"mountPath", "/"}, {"readOnly", read_only}}}}}}}};
    EXPECT_EQ(checkpoint_storage_errors(defaulted(job)).size(), 1u) << volume.dump();
  }
}

TEST(CheckpointStorage, LastingVolumesAtOrAboveTheDirAndJobsThatNeverRestartAreAccepted) {
  for (const char* mount : {"/ckpt", "/", "/ckpt/"}) {
    json job = without_template(JobBuilder().build());
    job["spec"]["gang"]["template"]["spec"] = {
        {"volumes", {{{"name", "shared"}, {"nfs", {{"server", "nfs.local"}, {"path", "/exports"}}}}}},
        {"containers", {{{"name", "worker"}, {"volumeMounts", {{{"name", "shared"}, {"mountPath", mount}}}}}}}};
    EXPECT_TRUE(checkpoint_storage_errors(defaulted(job)).empty()) << mount;
  }
  json no_path = without_template(JobBuilder().build());
  no_path["spec"]["gang"]["template"]["spec"] = {
      {"volumes", {{{"name", "shared"}, {"nfs", {{"server", "nfs.local"}, {"path", "/exports"}}}}}},
      {"containers", {{{"name", "worker"}, {"volumeMounts", {{{"name", "shared"}}}}}}}};
  EXPECT_EQ(checkpoint_storage_errors(defaulted(no_path)).size(), 1u) << "a mount without a path covers nothing";
  json sibling = JobBuilder().build();
  sibling["spec"]["training"]["checkpoint"]["dir"] = "/ckpt-other";
  EXPECT_EQ(checkpoint_storage_errors(defaulted(sibling)).size(), 1u) << "/ckpt is not above /ckpt-other";
  EXPECT_TRUE(
      checkpoint_storage_errors(defaulted(without_template(JobBuilder().restart_policy("Never").build()))).empty());
}

TEST(CheckpointStorage, AClaimTemplateMakesAClaimOwnedByTheJobMountedOnWorkerZero) {
  json job = without_template(JobBuilder().build());
  job["spec"]["training"]["checkpoint"]["volumeClaimTemplate"] = {
      {"metadata", {{"labels", {{"tier", "fast"}}}}},
      {"spec", {{"storageClassName", "ssd"}, {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}};
  const Plan p = plan(with_children(job, {}, at(0)));
  EXPECT_EQ(condition_reason(p, "Failed"), "<none>");
  ASSERT_NE(first_created(p, ChildKind::kClaim), nullptr);
  const json& claim = *first_created(p, ChildKind::kClaim);
  EXPECT_EQ(claim["metadata"]["name"], "mnist-checkpoint");
  EXPECT_EQ(claim["metadata"]["labels"]["tier"], "fast");
  EXPECT_FALSE(claim["metadata"]["labels"].contains(std::string(kLabelAttempt))) << "it serves every attempt";
  EXPECT_EQ(claim["metadata"]["ownerReferences"][0]["uid"], "uid-mnist");
  EXPECT_EQ(claim["spec"]["accessModes"], json::array({"ReadWriteOnce"})) << "rank 0 alone reads and writes";
  EXPECT_EQ(claim["spec"]["storageClassName"], "ssd");
  // The claim comes before the pod that mounts it; only worker 0 (rank 0) mounts it, at checkpoint.dir.
  size_t claim_at = 0;
  std::vector<json> pods;
  for (size_t i = 0; i < p.creates.size(); ++i) {
    if (p.creates[i].kind == ChildKind::kClaim) claim_at = i;
    if (p.creates[i].kind == ChildKind::kPod) {
      EXPECT_LT(claim_at, i);
      pods.push_back(p.creates[i].object);
    }
  }
  ASSERT_EQ(pods.size(), 2u);
  const auto named = [](const json& list, const std::string& name) {
    for (const json& item : list) {
      if (item.value("name", "") == name) return item;
    }
    return json();
  };
  EXPECT_EQ(named(pods[0]["spec"]["volumes"], "torus-checkpoint"),
            (json{{"name", "torus-checkpoint"}, {"persistentVolumeClaim", {{"claimName", "mnist-checkpoint"}}}}));
  EXPECT_EQ(named(pods[0]["spec"]["containers"][0]["volumeMounts"], "torus-checkpoint"),
            (json{{"name", "torus-checkpoint"}, {"mountPath", "/ckpt"}}));
  EXPECT_EQ(pods[1]["spec"]["volumes"].dump().find("torus-checkpoint"), std::string::npos);
  // Worker 0 running: no claim made again.
  const Plan steady = plan(with_children(job, {PodBuilder("mnist", 0).running().build()}, at(1)));
  EXPECT_EQ(first_created(steady, ChildKind::kClaim), nullptr);
}

// Every example, as the operator would run it: accepted, and worker 0 mounts its data path and its checkpoint dir
// (issue 27.6: an example that ran under `torus run` found nothing at those paths in a pod).
TEST(CheckpointStorage, EveryExampleMountsItsDataAndCheckpointsOnWorkerZero) {
  for (const char* name : {"fashion-mnist", "cifar10-resnet9", "imagenet-resnet50"}) {
    const api::TrainingJob job = api::load_job_file(std::string(TORUS_SOURCE_DIR) + "/examples/" + name + ".yaml");
    json doc = api::to_json(job);
    doc["metadata"]["uid"] = std::string("uid-") + name;
    doc["metadata"]["namespace"] = "team";
    const Plan p = plan(with_children(doc, {}, at(0)));
    EXPECT_EQ(condition_reason(p, "Failed"), "<none>") << name << ": " << failure_message(p);
    const json* pod = first_created(p, ChildKind::kPod);
    ASSERT_NE(pod, nullptr) << name;
    std::vector<std::string> mounts;
    for (const json& m : (*pod)["spec"]["containers"][0]["volumeMounts"]) mounts.push_back(m["mountPath"]);
    auto mounted = [&](const std::string& path) {
      return std::any_of(mounts.begin(), mounts.end(),
                         [&](const std::string& m) { return path == m || path.starts_with(m + "/"); });
    };
    EXPECT_TRUE(job.spec.data.path.empty() || mounted(job.spec.data.path)) << name << ": " << job.spec.data.path;
    const std::string& dir = job.spec.training.checkpoint.dir;
    EXPECT_TRUE(dir.empty() || mounted(dir)) << name << ": " << dir;
    std::sort(mounts.begin(), mounts.end());
    EXPECT_EQ(std::adjacent_find(mounts.begin(), mounts.end()), mounts.end()) << name << ": a path mounted twice";
  }
}

}  // namespace
}  // namespace torus::controller

// `torus run` front half: --set overrides, loading and validation, and that an invalid job starts nothing.
#include "operator/runtime/local_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace torus::runtime {
namespace {

namespace fs = std::filesystem;
const std::string kExample = std::string(TORUS_SOURCE_DIR) + "/examples/fashion-mnist.yaml";

TEST(ApplySet, SetsScalarsListsAndNestedKeys) {
  nlohmann::json doc = {{"spec", {{"training", {{"epochs", 4}, {"phases", {{{"imageSize", 28}}}}}}}}};
  api::FieldErrors errors;
  apply_set(doc, "spec.training.epochs=2", errors);
  apply_set(doc, "spec.training.phases[0].imageSize=32", errors);
  apply_set(doc, "spec.model.widths=[8, 16]", errors);
  apply_set(doc, "spec.training.augmentation.flip=false", errors);
  apply_set(doc, "metadata.name=demo", errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(doc["spec"]["training"]["epochs"], 2);
  EXPECT_EQ(doc["spec"]["training"]["phases"][0]["imageSize"], 32);
  EXPECT_EQ(doc["spec"]["model"]["widths"], nlohmann::json({8, 16}));
  EXPECT_EQ(doc["spec"]["training"]["augmentation"]["flip"], false);
  EXPECT_EQ(doc["metadata"]["name"], "demo");
}

TEST(ApplySet, MalformedAssignmentsNameTheArgument) {
  nlohmann::json doc = {{"spec", {{"training", {{"epochs", 4}}}}}};
  api::FieldErrors errors;
  apply_set(doc, "spec.training.epochs", errors);
  apply_set(doc, "spec.training.phases[3].imageSize=1", errors);
  apply_set(doc, "spec.training.epochs.x=1", errors);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].message.find("--set spec.training.epochs: expected path=value"), std::string::npos);
  EXPECT_NE(errors[1].message.find("no list element [3]"), std::string::npos);
  EXPECT_NE(errors[2].message.find("not a map"), std::string::npos);
}

TEST(LoadLocalJob, TheExampleLoadsWithOverrides) {
  LocalRunOptions o;
  o.job_file = kExample;
  o.workers = 4;
  o.sets = {"spec.training.epochs=1"};
  auto loaded = load_local_job(o);
  ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().to_string();
  EXPECT_EQ(loaded.job.spec.gang.workers, 4);
  EXPECT_EQ(loaded.job.spec.training.epochs, 1);
}

TEST(LoadLocalJob, ReportsEveryErrorWithItsPath) {
  LocalRunOptions o;
  o.job_file = kExample;
  o.sets = {"spec.training.batchSize=-4", "spec.training.batchSze=3"};
  auto loaded = load_local_job(o);
  std::string all;
  for (const auto& e : loaded.errors) all += e.to_string() + "\n";
  EXPECT_NE(all.find("spec.training.batchSize"), std::string::npos) << all;
  EXPECT_NE(all.find("spec.training.batchSze"), std::string::npos) << all;
}

TEST(LoadLocalJob, UnreadableFileIsAnError) {
  LocalRunOptions o;
  o.job_file = "/nonexistent/job.yaml";
  auto loaded = load_local_job(o);
  ASSERT_EQ(loaded.errors.size(), 1u);
  EXPECT_NE(loaded.errors[0].message.find("/nonexistent/job.yaml"), std::string::npos);
}

TEST(LoadLocalJob, AJobManagedByAnotherControllerIsRefusedNamingTheField) {
  LocalRunOptions o;
  o.job_file = kExample;
  o.sets = {"spec.runPolicy.managedBy=kueue.x-k8s.io/multikueue"};
  const auto refused = load_local_job(o);
  ASSERT_EQ(refused.errors.size(), 1u);
  EXPECT_EQ(refused.errors[0].path, "spec.runPolicy.managedBy");
  EXPECT_NE(refused.errors[0].message.find("kueue.x-k8s.io/multikueue"), std::string::npos);
  o.sets = {"spec.runPolicy.managedBy=torus.dev/operator"};
  EXPECT_TRUE(load_local_job(o).errors.empty()) << "the operator's own name: torus run stands in for it";
}

// A job of the fields `torus run` applies only.
fs::path local_only_job(const fs::path& dir) {
  const fs::path file = dir / "local.yaml";
  std::ofstream(file) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: local}\nspec:\n"
                         "  gang: {workers: 1}\n  model: {arch: resnet9}\n  data: {dataset: synthetic}\n"
                         "  training: {epochs: 1, batchSize: 32, lrSchedule: {peak: 0.1}}\n"
                         "  runPolicy: {restartPolicy: Never}\n";
  return file;
}

TEST(LoadLocalJob, OperatorOnlyFieldsAreListed) {
  const test::TempDir tmp("torus-run-operator-fields");
  LocalRunOptions o;
  o.job_file = local_only_job(tmp.path()).string();
  const LoadedJob plain = load_local_job(o);
  ASSERT_TRUE(plain.errors.empty()) << plain.errors.front().to_string();
  EXPECT_TRUE(plain.not_applied.empty());
  o.sets = {
      "spec.gang.image=registry.example/torus:1", "spec.runPolicy.ttlSecondsAfterFinished=60",
      "spec.runPolicy.schedulingPolicy={schedulerName: volcano, queue: team-a}", "spec.metricsPort=9090",
      "spec.training.checkpoint={dir: /ckpt, volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}"};
  const LoadedJob named = load_local_job(o);
  EXPECT_TRUE(named.errors.empty()) << named.errors.front().to_string();
  // Each field by its path (api::kOperatorOnlyFields' order), the claim template included (it was missed).
  EXPECT_EQ(named.not_applied,
            (std::vector<std::string>{"spec.gang.image", "spec.training.checkpoint.volumeClaimTemplate",
                                      "spec.runPolicy.ttlSecondsAfterFinished",
                                      "spec.runPolicy.schedulingPolicy.schedulerName",
                                      "spec.runPolicy.schedulingPolicy.queue", "spec.metricsPort"}));
}

TEST(RunLocal, SaysOnceWhichOperatorOnlyFieldsItDoesNotApply) {
  const test::TempDir tmp("torus-run-operator-note");
  LocalRunOptions o;
  o.job_file = local_only_job(tmp.path()).string();
  o.worker_binary = "/nonexistent/torus-worker";  // nothing starts: the job is suspended
  o.sets = {"spec.gang.image=registry.example/torus:1", "spec.runPolicy.suspend=true"};
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  const int code = run_local(o);
  const std::string err = testing::internal::GetCapturedStderr();
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  const std::string note = "torus run: not applied here (the operator applies them to pods): spec.gang.image\n";
  const size_t at = err.find(note);
  ASSERT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find(note, at + 1), std::string::npos) << "once: " << err;
}

TEST(GangPolicyOf, MapsTheRunPolicy) {
  api::TrainingJobSpec spec;
  spec.run_policy.restart_policy = api::RestartPolicy::kNever;
  spec.run_policy.backoff_limit = 7;
  spec.run_policy.active_deadline_seconds = 60;
  auto p = controller::gang_policy_of(spec);
  EXPECT_EQ(p.restart_policy, controller::RestartPolicy::kNever);
  EXPECT_EQ(p.backoff_limit, 7);
  EXPECT_EQ(p.active_deadline, controller::Seconds(60));
}

TEST(RunLocal, AnInvalidJobNeverStartsAProcess) {
  const test::TempDir tmp("torus-run-invalid");
  const fs::path& dir = tmp.path();
  const fs::path marker = dir / "started";
  const fs::path worker = dir / "worker.sh";
  {
    std::ofstream w(worker);
    w << "#!/bin/sh\ntouch " << marker.string() << "\n";
  }
  fs::permissions(worker, fs::perms::owner_all);
  LocalRunOptions o;
  o.job_file = kExample;
  o.worker_binary = worker.string();
  o.sets = {"spec.training.epochs=0"};
  testing::internal::CaptureStderr();
  const int code = run_local(o);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("--set spec.training.epochs: spec.training.epochs"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(marker));
}

}  // namespace
}  // namespace torus::runtime

// `torus run` front half: --set overrides, loading and validation, and that an invalid job starts nothing.
#include "operator/runtime/local_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

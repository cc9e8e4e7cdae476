#include "common/api/codec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/api/defaults.h"
#include "common/util/error.h"
#include "tests/api/corpus.h"

namespace torus::api {
namespace {

using nlohmann::json;

bool has_path(const FieldErrors& errors, const std::string& path) {
  return std::any_of(errors.begin(), errors.end(), [&](const FieldError& e) { return e.path == path; });
}

std::string dump(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

TrainingJob full_status_job() {
  TrainingJob job = from_yaml(testing::read_text(testing::source_dir() / "examples/imagenet-resnet50.yaml"));
  job.metadata.uid = "0f6c-uid";
  job.metadata.resource_version = "42";
  job.metadata.generation = 3;
  job.metadata.creation_timestamp = "2026-11-22T06:00:00Z";
  job.metadata.finalizers = {"torus.dev/cleanup"};
  job.metadata.owner_references.push_back({"v1", "ConfigMap", "owner", "u-1", true, std::nullopt});
  TrainingJobStatus& s = job.status;
  s.phase = Phase::kRestarting;
  s.conditions.push_back(
      {"Running", ConditionStatus::kFalse, "WorkerFailed", "rank 3 exited 42", "2026-11-22T06:10:00Z", 3});
  s.observed_generation = 3;
  s.attempt = 2;
  s.restarts = 2;
  s.disruptions = 1;
  s.start_time = "2026-11-22T06:00:05Z";
  s.workers = {14, 16, 0, 2};
  s.progress = {12, 34567, 1.25, 0.615, 51234.5, 900, 187.5, "2026-11-22T06:09:59Z"};
  s.last_checkpoint = {"/mnt/checkpoints/imagenet-resnet50/epoch-12", 12, 34000, "2026-11-22T06:09:00Z"};
  s.ranks.push_back({0, 0, 0, "imagenet-resnet50-worker-0", "node-a"});
  s.ranks.push_back({9, 1, 1, "imagenet-resnet50-worker-1", "node-b", "rack-1"});
  return job;
}

TEST(Codec, JsonRoundTripKeepsEveryField) {
  const TrainingJob job = full_status_job();
  const json encoded = to_json(job);
  EXPECT_EQ(encoded["spec"]["training"]["phases"][1]["perRankBatchSize"], 128);
  EXPECT_EQ(encoded["status"]["phase"], "Restarting");
  EXPECT_EQ(encoded["metadata"]["namespace"], "research");
  const Decoded back = decode_json(encoded);
  EXPECT_TRUE(back.errors.empty()) << dump(back.errors);
  EXPECT_EQ(back.job, job);
}

TEST(Codec, YamlRoundTripKeepsEveryField) {
  const TrainingJob job = full_status_job();
  const std::string yaml = to_yaml(job);
  const Decoded back = decode_yaml(yaml);
  EXPECT_TRUE(back.errors.empty()) << dump(back.errors) << yaml;
  EXPECT_EQ(back.job, job) << yaml;
}

TEST(Codec, DefaultedExamplesRoundTrip) {
  for (const auto& path : testing::yaml_files(testing::source_dir() / "examples")) {
    const TrainingJob job = with_defaults(from_yaml(testing::read_text(path), path.string()));
    EXPECT_EQ(from_yaml(to_yaml(job)), job) << path;
    EXPECT_EQ(from_json(to_json(job)), job) << path;
  }
}

TEST(Codec, UnknownFieldsAreErrorsWithTheirPath) {
  const Decoded d = decode_yaml(R"(
apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata: {name: a, colour: blue}
spec:
  training: {epochs: 1, batchSze: 256}
  gang:
    workers: 1
    template: {spec: {anything: [1, 2]}, extra: true}
    resources: {limits: {nvidia.com/gpu: 1}}
  runPolicy: {schedulingPolicy: {queue: q, prio: 1}}
  nonsense: 1
)");
  EXPECT_TRUE(has_path(d.errors, "spec.training.batchSze")) << dump(d.errors);
  EXPECT_TRUE(has_path(d.errors, "metadata.colour")) << dump(d.errors);
  EXPECT_TRUE(has_path(d.errors, "spec.runPolicy.schedulingPolicy.prio")) << dump(d.errors);
  EXPECT_TRUE(has_path(d.errors, "spec.nonsense")) << dump(d.errors);
  EXPECT_EQ(d.errors.size(), 4u) << dump(d.errors);  // nothing inside the opaque template/resources
  EXPECT_EQ(d.errors[0].message, "unknown field");
  EXPECT_EQ(d.job.spec.gang.pod_template["spec"]["anything"][1], 2);
  EXPECT_EQ(d.job.spec.training.epochs, 1);
}

TEST(Codec, WrongTypesNameTheFieldAndWhatWasExpected) {
  const Decoded d = decode_yaml(R"(
spec:
  gang: {workers: "2", processesPerWorker: 1.5, device: tpu}
  training: {epochs: 3000000000, optimizer: {nesterov: yes}}
  model: {widths: [64, x]}
  metricsPort: [1]
)");
  auto message_of = [&](const std::string& path) {
    for (const auto& e : d.errors) {
      if (e.path == path) return e.message;
    }
    return std::string("<none>");
  };
  EXPECT_EQ(message_of("spec.gang.workers"), "must be an integer, got a string \"2\"");
  EXPECT_EQ(message_of("spec.gang.processesPerWorker"), "must be an integer, got a number 1.5");
  EXPECT_EQ(message_of("spec.gang.device"), "must be one of \"cpu\", \"gpu\", got \"tpu\"");
  EXPECT_EQ(message_of("spec.training.epochs"), "must fit in 32 bits, got 3000000000");
  // YAML 1.2: `yes` is a string, not a boolean.
  EXPECT_EQ(message_of("spec.training.optimizer.nesterov"), "must be a boolean (true or false), got a string \"yes\"");
  EXPECT_EQ(message_of("spec.model.widths[1]"), "must be an integer, got a string \"x\"");
  EXPECT_EQ(message_of("spec.metricsPort"), "must be an integer, got a list [1]");
  EXPECT_FALSE(d.job.spec.gang.workers.has_value());
}

TEST(Codec, MalformedYamlReportsLineAndColumn) {
  const Decoded d = decode_yaml("spec:\n  gang:\n    workers: [1, 2\n  model: {}\n");
  ASSERT_EQ(d.errors.size(), 1u);
  EXPECT_TRUE(d.errors[0].path.empty());
  EXPECT_GT(d.errors[0].line, 2);
  EXPECT_GT(d.errors[0].column, 0);
  EXPECT_NE(d.errors[0].to_string("job.yaml").find("job.yaml:" + std::to_string(d.errors[0].line) + ":"),
            std::string::npos);
}

TEST(Codec, DuplicateKeysAndMultipleDocumentsAreErrors) {
  const Decoded dup = decode_yaml("spec:\n  gang: {workers: 1}\n  gang: {workers: 2}\n");
  EXPECT_TRUE(has_path(dup.errors, "spec.gang")) << dump(dup.errors);
  EXPECT_EQ(dup.errors.at(0).to_string("job.yaml"), "job.yaml:3:3: spec.gang: duplicate field (first given on line 2)");
  const Decoded two = decode_yaml("kind: TrainingJob\n---\nkind: TrainingJob\n");
  ASSERT_EQ(two.errors.size(), 1u);
  EXPECT_NE(two.errors[0].message.find("found 2"), std::string::npos);
  const Decoded list = decode_yaml("- 1\n- 2\n");
  ASSERT_EQ(list.errors.size(), 1u);
  EXPECT_NE(list.errors[0].message.find("must be a map"), std::string::npos);
  EXPECT_EQ(list.errors[0].to_string("job.yaml"), "job.yaml:1:1: a TrainingJob must be a map, got a list");
}

TEST(Codec, NullMeansNotGiven) {
  const Decoded d = decode_yaml("spec:\n  gang: {workers: null, image: ~}\n  training: ~\n");
  EXPECT_TRUE(d.errors.empty()) << dump(d.errors);
  EXPECT_FALSE(d.job.spec.gang.workers.has_value());
}

TEST(Codec, FromYamlThrowsWithEveryErrorAndTheSource) {
  try {
    from_yaml("spec: {a: 1, b: 2}\n", "job.yaml");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "job.yaml:1:8: spec.a: unknown field\njob.yaml:1:14: spec.b: unknown field");
  }
}

TEST(Codec, EncodingLeavesOutUnsetFields) {
  TrainingJob job;
  job.metadata.name = "x";
  job.spec.gang.workers = 2;
  const json j = to_json(job);
  EXPECT_EQ(j, json::parse(R"({"apiVersion": "torus.dev/v1alpha1", "kind": "TrainingJob",
                               "metadata": {"name": "x"}, "spec": {"gang": {"workers": 2}}})"));
}

}  // namespace
}  // namespace torus::api

#include "common/api/validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/util/error.h"
#include "tests/api/base_job.h"
#include "tests/api/corpus.h"

namespace torus::api {
namespace {

using nlohmann::json;
using testing::kBase;

std::string dump(const FieldErrors& errors) {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

FieldErrors errors_of(const json& patch) {
  json document = kBase;
  document.merge_patch(patch);
  const Decoded decoded = decode_json(document);
  return check_decoded(decoded);
}

TEST(Validation, TheBaseJobIsValid) { EXPECT_TRUE(errors_of(json::object()).empty()) << dump(errors_of({})); }

struct Case {
  const char* name;
  const char* patch;                  // JSON merge patch on kBase
  std::vector<std::string> expected;  // exact "path: message" lines, in order
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ValidationCase : public ::testing::TestWithParam<Case> {};

TEST_P(ValidationCase, ReportsExactlyTheseErrors) {
  const Case& c = GetParam();
  const FieldErrors errors = errors_of(json::parse(c.patch));
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.to_string());
  EXPECT_EQ(lines, c.expected) << dump(errors);
}

const Case kCases[] = {
    {"negative_batch",
     R"({"spec": {"training": {"batchSize": -4}}})",
     {"spec.training.batchSize: must be a positive integer, got -4"}},
    {"batch_not_divisible",
     R"({"spec": {"training": {"batchSize": 250}}})",
     {"spec.training.batchSize: must be divisible by the world size 4 (workers x processesPerWorker), got 250"}},
    {"both_batches",
     R"({"spec": {"training": {"perRankBatchSize": 64}}})",
     {"spec.training.batchSize: give batchSize (global) or perRankBatchSize, not both"}},
    {"no_batch",
     R"({"spec": {"training": {"batchSize": null}}})",
     {"spec.training.batchSize: is required: batchSize (global) or perRankBatchSize"}},
    {"missing_required",
     R"({"metadata": {"name": null}, "spec": {"gang": {"workers": null}, "model": {"arch": null},
        "data": {"dataset": null}, "training": {"epochs": null}}})",
     {"metadata.name: is required: the job's name", "spec.gang.workers: is required: the number of worker pods",
      "spec.model.arch: is required: the network, one of \"resnet9\", \"resnet18\", \"resnet34\", \"resnet50\"",
      "spec.data.dataset: is required: the data set", "spec.training.epochs: is required: the number of epochs"}},
    {"bad_name",
     R"({"metadata": {"name": "My_Job"}})",
     {"metadata.name: must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
      "with a letter or digit: the job's Service takes this name) of at most 48 characters, got \"My_Job\""}},
    {"name_starts_with_digit",
     R"({"metadata": {"name": "9lives"}})",
     {"metadata.name: must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
      "with a letter or digit: the job's Service takes this name) of at most 48 characters, got \"9lives\""}},
    {"wrong_kind",
     R"({"apiVersion": "torus.dev/v1", "kind": "Job"})",
     {"apiVersion: must be \"torus.dev/v1alpha1\", got \"torus.dev/v1\"",
      "kind: must be \"TrainingJob\", got \"Job\""}},
    {"phases_gap_and_end",
     R"({"spec": {"training": {"phases": [{"fromEpoch": 0, "toEpoch": 2, "imageSize": 24},
                                          {"fromEpoch": 3, "toEpoch": 5, "batchSize": 510}]}}})",
     {"spec.training.phases[1].batchSize: must be divisible by the world size 4 (workers x processesPerWorker), got "
      "510",
      "spec.training.phases[1].fromEpoch: phases must be in order and leave no gap: expected 2 (the previous "
      "toEpoch), got 3",
      "spec.training.phases[1].toEpoch: the last phase must end at training.epochs (4), got 5"}},
    {"phase_backwards",
     R"({"spec": {"training": {"phases": [{"fromEpoch": 0, "toEpoch": 0}]}}})",
     {"spec.training.phases[0].toEpoch: must be a positive integer, got 0",
      "spec.training.phases[0].toEpoch: must be greater than fromEpoch (0), got 0",
      "spec.training.phases[0].toEpoch: the last phase must end at training.epochs (4), got 0"}},
    {"grid_mismatch",
     R"({"spec": {"allReduce": {"algorithm": "torus2d", "grid": {"x": 3, "y": 2}}}})",
     {"spec.allReduce.grid: x * y must equal the world size 4, got 3 x 2"}},
    {"grid_without_torus",
     R"({"spec": {"allReduce": {"algorithm": "ring", "grid": {"x": 2, "y": 2}}}})",
     {"spec.allReduce.grid: is only for algorithm torus2d"}},
    {"restart_needs_checkpoint",
     R"({"spec": {"runPolicy": {"restartPolicy": "ExitCode"}}})",
     {"spec.training.checkpoint.dir: is required when runPolicy.restartPolicy is ExitCode: a restarted gang resumes "
      "from its last checkpoint"}},
    {"ranges",
     R"({"spec": {"training": {"labelSmoothing": 1.0, "targetAccuracy": 0, "optimizer": {"momentum": -0.1}},
                  "allReduce": {"bucketSizeMB": 0}, "metricsPort": 70000}})",
     {"spec.training.optimizer.momentum: must be a number in [0, 1), got -0.1",
      "spec.training.labelSmoothing: must be a number in [0, 1), got 1",
      "spec.training.targetAccuracy: must be a number in (0, 1], got 0",
      "spec.allReduce.bucketSizeMB: must be a number in (0, inf), got 0",
      "spec.metricsPort: must be an integer in [1, 65535], got 70000"}},
    {"piecewise_with_peak",
     R"({"spec": {"training": {"lrSchedule": {"type": "piecewise-linear", "points": [{"epoch": 2, "lr": 0.1},
                                                                                      {"epoch": 1, "lr": 0.2}]}}}})",
     {"spec.training.lrSchedule.points[1].epoch: points must be in epoch order: 1 comes after 2",
      "spec.training.lrSchedule.peak: is only for type one-cycle (piecewise-linear uses points)"}},
    {"cifar_needs_path",
     R"({"spec": {"data": {"dataset": "cifar10"}}})",
     {"spec.data.path: is required for dataset cifar10 (the folder of the binary batches)"}},
    {"fp16_on_cpu",
     R"({"spec": {"training": {"precision": "fp16"}}})",
     {"spec.training.precision: the CPU engine trains in fp32 (it has no fp16 path): use fp32, or gang.device gpu"}},
    {"bf16_on_cpu",
     R"({"spec": {"training": {"precision": "bf16"}}})",
     {"spec.training.precision: the CPU engine trains in fp32 (it has no bf16 path): use fp32, or gang.device gpu"}},
    {"resnet9_has_no_stem_or_zero_init",
     R"({"spec": {"model": {"stem": "imagenet", "zeroInitResidual": true}}})",
     {"spec.model.stem: resnet9 has no choice of stem (its 3x3 prep convolution is the cifar stem); imagenet is for "
      "resnet18/34/50",
      "spec.model.zeroInitResidual: resnet9's residual blocks end in BN + ReLU, where a zero gamma would stop their "
      "gradient for good; zero-init is for resnet18/34/50"}},
    {"two_crops",
     R"({"spec": {"training": {"augmentation": {"cropPadding": 4, "randomResizedCropMinScale": 0.35}}}})",
     {"spec.training.augmentation.cropPadding: pad-and-crop and random-resized crop are alternatives: give "
      "cropPadding or randomResizedCropMinScale, not both"}},
    {"cifar_is_rgb",
     R"({"spec": {"model": {"inputChannels": 1}, "data": {"dataset": "cifar10", "path": "/data/cifar"}}})",
     {"spec.model.inputChannels: must be 3 for cifar10 (its images are decoded as RGB), got 1"}},
    {"compression_on_gpu",
     R"({"spec": {"gang": {"device": "gpu"}, "allReduce": {"compression": "fp16"}}})",
     {"spec.allReduce.compression: GPU workers all-reduce fp32 gradients with NCCL; compression applies to "
      "gang.device cpu, got fp16"}},
    {"host_algorithm_on_gpu",
     R"({"spec": {"gang": {"device": "gpu"}, "allReduce": {"algorithm": "hierarchical"}}})",
     {"spec.allReduce.algorithm: GPU workers average gradients with NCCL, which picks its own ring or tree per "
      "message (it takes no algorithm from the job); hierarchical acts on gang.device cpu only: use auto"}},
    {"ring_on_gpu",  // it used to pass, and NCCL ignored it
     R"({"spec": {"gang": {"device": "gpu"}, "allReduce": {"algorithm": "ring"}}})",
     {"spec.allReduce.algorithm: GPU workers average gradients with NCCL, which picks its own ring or tree per "
      "message (it takes no algorithm from the job); ring acts on gang.device cpu only: use auto"}},
    {"gpu_request_of_another_count",
     R"({"spec": {"gang": {"device": "gpu", "resources": {"limits": {"nvidia.com/gpu": 4}}}}})",
     {"spec.gang.resources.limits.nvidia.com/gpu: a GPU worker pod gets one GPU per process "
      "(gang.processesPerWorker 2): set processesPerWorker to the GPUs a pod should have, or leave the GPUs out of "
      "resources, got 4"}},
    {"min_available_without_a_gang_scheduler",
     R"({"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}})",
     {"spec.runPolicy.schedulingPolicy.minAvailable: is the minMember of the PodGroup the operator makes for a gang "
      "scheduler, and no schedulerName names one (the default scheduler places pods one by one and reads no "
      "minimum): set schedulerName, or unset minAvailable"}},
    {"min_available_and_queue_of_the_users_own_group",
     R"({"spec": {"runPolicy": {"schedulingPolicy": {"schedulerName": "volcano", "podGroup": "shared", )"
     R"("minAvailable": 2, "queue": "q"}}}})",
     {"spec.runPolicy.schedulingPolicy.minAvailable: podGroup names your own PodGroup, whose minMember is yours to "
      "set: unset minAvailable",
      "spec.runPolicy.schedulingPolicy.queue: podGroup names your own PodGroup: set its queue there, and unset queue"}},
    {"queue_without_volcano",
     R"({"spec": {"runPolicy": {"schedulingPolicy": {"schedulerName": "scheduler-plugins-scheduler", "queue": "q"}}}})",
     {"spec.runPolicy.schedulingPolicy.queue: only Volcano's PodGroup has a queue (schedulerName: volcano), and "
      "schedulerName is \"scheduler-plugins-scheduler\": nothing would read it"}},
    {"threads_on_gpu",
     R"({"spec": {"gang": {"device": "gpu", "threadsPerProcess": 4}}})",
     {"spec.gang.threadsPerProcess: sets the CPU engine's math threads; a GPU rank computes on its device: unset it "
      "for gang.device gpu, got 4"}},
    {"head_narrower_than_synthetic_labels",
     R"({"spec": {"model": {"numClasses": 4}, "data": {"synthetic": {"numClasses": 10}}}})",
     {"spec.model.numClasses: must be at least data.synthetic.numClasses (10), got 4"}},
    {"torus_needs_two_by_two",
     R"({"spec": {"gang": {"workers": 4, "processesPerWorker": 1}, "allReduce": {"algorithm": "torus2d"}}})",
     {"spec.allReduce.grid: torus2d needs at least 2 x 2 ranks (x along the fast dimension, y rows), got 1 x 4; use "
      "ring or hierarchical"}},
    {"min_available",
     R"({"spec": {"runPolicy": {"schedulingPolicy": {"schedulerName": "volcano", "minAvailable": 3}}}})",
     {"spec.runPolicy.schedulingPolicy.minAvailable: must not exceed gang.workers (2), got 3"}},
    {"rendezvous_on_a_local_ranks_metrics_port",
     R"({"spec": {"metricsPort": 9000, "rendezvousPort": 9001}})",
     {"spec.rendezvousPort: must not be one of the local ranks' metrics ports 9000..9001 (local rank k serves "
      "metricsPort + k), got 9001"}},
    {"local_ranks_metrics_ports_past_65535",
     R"({"spec": {"metricsPort": 65535}})",
     {"spec.metricsPort: local rank k serves metricsPort + k: with processesPerWorker 2 the ports up to 65536 must be "
      "at most 65535, got 65535"}},
    {"claim_template_needs_a_size_and_an_absolute_dir",
     R"({"spec": {"training": {"checkpoint": {"dir": "ckpt",
        "volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}}})",
     {"spec.training.checkpoint.dir: must be an absolute path when volumeClaimTemplate is set (the claim is mounted "
      "there), got \"ckpt\"",
      "spec.training.checkpoint.volumeClaimTemplate.spec.resources.requests.storage: is required: the claim's size, "
      "e.g. 10Gi"}},
    {"decode_error_hides_follow_up",
     R"({"spec": {"training": {"batchSize": "256"}}})",
     {"spec.training.batchSize: must be an integer, got a string \"256\""}},
};

INSTANTIATE_TEST_SUITE_P(Table, ValidationCase, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Validation, EveryExampleIsValid) {
  const auto files = testing::yaml_files(testing::source_dir() / "examples");
  ASSERT_GE(files.size(), 3u);
  for (const auto& path : files) {
    const FieldErrors errors = check_file(path.string());
    EXPECT_TRUE(errors.empty()) << path << "\n" << dump(errors);
  }
}

TEST(Validation, LoadJobFileDefaultsOrThrowsWithTheFileName) {
  const std::string path = (testing::source_dir() / "examples/fashion-mnist.yaml").string();
  const TrainingJob job = load_job_file(path);
  EXPECT_EQ(job.spec.data.image_size, 28);
  EXPECT_EQ(job.spec.model.input_channels, 1);
  try {
    load_job_yaml("kind: TrainingJob\n", "inline.yaml");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    // Nothing of it is there: both point at the document's first line.
    EXPECT_NE(std::string(e.what()).find("inline.yaml:1:1: apiVersion: must be"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inline.yaml:1:1: spec.gang.workers: is required"), std::string::npos)
        << e.what();
  }
}

// ---- positions: every error of a YAML source points at its field (source_map.h) ----

// The `torus validate` lines of `yaml`, as if read from job.yaml.
std::vector<std::string> located_lines(const std::string& yaml) {
  std::vector<std::string> lines;
  for (const auto& e : check_decoded(decode_yaml(yaml))) lines.push_back(e.to_string("job.yaml"));
  return lines;
}

// A valid job in block style; each test changes one line of it.
const std::vector<std::string> kBlockJob = {
    "apiVersion: torus.dev/v1alpha1",  // 1
    "kind: TrainingJob",               // 2
    "metadata:",                       // 3
    "  name: base",                    // 4
    "  labels:",                       // 5
    "    team: vision",                // 6
    "spec:",                           // 7
    "  gang:",                         // 8
    "    workers: 2",                  // 9
    "  model:",                        // 10
    "    arch: resnet9",               // 11
    "  data:",                         // 12
    "    dataset: synthetic",          // 13
    "  training:",                     // 14
    "    epochs: 4",                   // 15
    "    batchSize: 256",              // 16
    "    lrSchedule:",                 // 17
    "      peak: 0.2",                 // 18
    "    phases:",                     // 19
    "      - fromEpoch: 0",            // 20
    "        toEpoch: 2",              // 21
    "      - fromEpoch: 2",            // 22
    "        toEpoch: 4",              // 23
};

// kBlockJob with the given lines (1-based) replaced: by several lines, or by none ("").
std::string block_job(const std::map<size_t, std::string>& changes = {}) {
  std::string out;
  for (size_t i = 0; i < kBlockJob.size(); ++i) {
    const auto change = changes.find(i + 1);
    if (change == changes.end()) {
      out += kBlockJob[i] + "\n";
    } else if (!change->second.empty()) {
      out += change->second + "\n";
    }
  }
  return out;
}

TEST(SourcePositions, TheBlockJobIsValid) { EXPECT_TRUE(located_lines(block_job()).empty()); }

TEST(SourcePositions, UnknownFieldPointsAtItsKey) {
  EXPECT_EQ(located_lines(block_job({{16, "    batchSze: 256"}})),
            (std::vector<std::string>{"job.yaml:16:5: spec.training.batchSze: unknown field",
                                      "job.yaml:14:3: spec.training.batchSize: is required: batchSize (global) or "
                                      "perRankBatchSize"}));
}

TEST(SourcePositions, WrongTypePointsAtTheField) {
  EXPECT_EQ(located_lines(block_job({{9, "    workers: [2]"}})),
            std::vector<std::string>{"job.yaml:9:5: spec.gang.workers: must be an integer, got a list [2]"});
  EXPECT_EQ(located_lines(block_job({{6, "    team: 7"}})),
            std::vector<std::string>{"job.yaml:6:5: metadata.labels[team]: must be a string, got an integer 7"});
}

TEST(SourcePositions, SemanticErrorsPointAtTheField) {
  EXPECT_EQ(located_lines(block_job({{16, "    batchSize: -4"}})),
            std::vector<std::string>{"job.yaml:16:5: spec.training.batchSize: must be a positive integer, got -4"});
  // A map entry's path is written labels[key]: it is found all the same.
  EXPECT_EQ(located_lines(block_job({{6, "    team: \"not valid!\""}})),
            std::vector<std::string>{"job.yaml:6:5: metadata.labels[team]: value must be at most 63 alphanumerics, "
                                     "'-', '_' or '.', got \"not valid!\""});
}

TEST(SourcePositions, AMissingFieldPointsAtTheMapItIsMissingFrom) {
  EXPECT_EQ(located_lines(block_job({{9, "    processesPerWorker: 1"}})),
            std::vector<std::string>{"job.yaml:8:3: spec.gang.workers: is required: the number of worker pods"});
  // In a list element: the element.
  EXPECT_EQ(located_lines(block_job({{23, ""}})),
            std::vector<std::string>{"job.yaml:22:9: spec.training.phases[1].toEpoch: is required: the epoch after "
                                     "the phase's last"});
  // Whose map is missing too: the nearest map present.
  EXPECT_EQ(located_lines(block_job({{12, ""}, {13, ""}})),
            std::vector<std::string>{"job.yaml:7:1: spec.data.dataset: is required: the data set"});
}

TEST(SourcePositions, AFieldInAListElementPointsAtItsKey) {
  EXPECT_EQ(located_lines(block_job({{22, "      - fromEpoch: 3"}})),
            std::vector<std::string>{"job.yaml:22:9: spec.training.phases[1].fromEpoch: phases must be in order and "
                                     "leave no gap: expected 2 (the previous toEpoch), got 3"});
  // Flow style: a key inside a map inside a flow sequence.
  EXPECT_EQ(located_lines(block_job({{19, "    phases: [{fromEpoch: 0, toEpoch: 2}, {fromEpoch: 2, toEpoch: 5}]"},
                                     {20, ""},
                                     {21, ""},
                                     {22, ""},
                                     {23, ""}})),
            std::vector<std::string>{"job.yaml:19:57: spec.training.phases[1].toEpoch: the last phase must end at "
                                     "training.epochs (4), got 5"});
}

TEST(SourcePositions, DuplicateKeysPointAtTheSecondOne) {
  EXPECT_EQ(
      located_lines(block_job({{16, "    batchSize: 256\n    batchSize: 128"}})),
      std::vector<std::string>{"job.yaml:17:5: spec.training.batchSize: duplicate field (first given on line 16)"});
}

TEST(SourcePositions, JsonErrorsHaveOnlyPaths) {
  json document = kBase;
  document["spec"]["training"]["batchSize"] = -4;
  const FieldErrors errors = check_decoded(decode_json(document));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].line, 0);
  EXPECT_EQ(errors[0].to_string("job.json"), "job.json: spec.training.batchSize: must be a positive integer, got -4");
}

}  // namespace
}  // namespace torus::api

#pragma once
// The TrainingJob resource (torus.dev/v1alpha1): the one contract the operator, `torus run` and the worker share.
// Field names follow the YAML/JSON spelling (camelCase there, snake_case here); docs/trainingjob.md is the
// reference and crds/trainingjobs.torus.dev.yaml the Kubernetes schema of the same model.
//
// Conventions of these structs:
// - A spec scalar the user may leave out is std::optional: unset means "take the default" (defaults.h fills it),
//   so an explicit 0 or false stays distinguishable from "not given".
// - Strings, lists and maps are unset when empty.
// - Durations are integer seconds; times are RFC 3339 strings (UTC, "2026-11-22T06:00:00Z").
// - `resources` and `template` are Kubernetes objects passed through as JSON (the operator merges them into pods).
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace torus::api {

inline constexpr std::string_view kGroup = "torus.dev";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "torus.dev/v1alpha1";
inline constexpr std::string_view kKind = "TrainingJob";
inline constexpr std::string_view kPlural = "trainingjobs";

// ---- enums: each has EnumNames<E> (the YAML spelling), to_string() and parse_enum<E>() below ----

enum class Device { kCpu, kGpu };
enum class Arch { kResNet9, kResNet18, kResNet34, kResNet50 };
enum class Stem { kCifar, kImageNet };
enum class Pooling { kMax, kAvg };
enum class Dataset { kFashionMnist, kCifar10, kImageFolder, kSynthetic };
enum class OptimizerKind { kSgd };
enum class LrScheduleKind { kOneCycle, kPiecewiseLinear };
enum class Precision { kFp32, kBf16, kFp16 };
enum class AllReduceAlgorithm { kAuto, kRing, kHierarchical, kTorus2d };
enum class Compression { kNone, kFp16, kBf16 };
enum class RestartPolicy { kNever, kOnFailure, kExitCode };
enum class CleanPodPolicy { kNone, kRunning, kAll };
enum class TopologyPlacement { kPreferred, kRequired, kExclusive };
enum class Phase { kPending, kInitializing, kRunning, kRestarting, kSucceeded, kFailed, kSuspended };
enum class ConditionStatus { kTrue, kFalse, kUnknown };

template <class E>
struct EnumNames;

#define TORUS_API_ENUM_NAMES(E, ...)                                                                    \
  template <>                                                                                           \
  struct EnumNames<E> {                                                                                 \
    static constexpr std::array kValues = std::to_array<std::pair<E, std::string_view>>({__VA_ARGS__}); \
  }

TORUS_API_ENUM_NAMES(Device, {Device::kCpu, "cpu"}, {Device::kGpu, "gpu"});
TORUS_API_ENUM_NAMES(Arch, {Arch::kResNet9, "resnet9"}, {Arch::kResNet18, "resnet18"}, {Arch::kResNet34, "resnet34"},
                     {Arch::kResNet50, "resnet50"});
TORUS_API_ENUM_NAMES(Stem, {Stem::kCifar, "cifar"}, {Stem::kImageNet, "imagenet"});
TORUS_API_ENUM_NAMES(Pooling, {Pooling::kMax, "max"}, {Pooling::kAvg, "avg"});
TORUS_API_ENUM_NAMES(Dataset, {Dataset::kFashionMnist, "fashion-mnist"}, {Dataset::kCifar10, "cifar10"},
                     {Dataset::kImageFolder, "imagefolder"}, {Dataset::kSynthetic, "synthetic"});
TORUS_API_ENUM_NAMES(OptimizerKind, {OptimizerKind::kSgd, "sgd"});
TORUS_API_ENUM_NAMES(LrScheduleKind, {LrScheduleKind::kOneCycle, "one-cycle"},
                     {LrScheduleKind::kPiecewiseLinear, "piecewise-linear"});
TORUS_API_ENUM_NAMES(Precision, {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"});
TORUS_API_ENUM_NAMES(AllReduceAlgorithm, {AllReduceAlgorithm::kAuto, "auto"}, {AllReduceAlgorithm::kRing, "ring"},
                     {AllReduceAlgorithm::kHierarchical, "hierarchical"}, {AllReduceAlgorithm::kTorus2d, "torus2d"});
TORUS_API_ENUM_NAMES(Compression, {Compression::kNone, "none"}, {Compression::kFp16, "fp16"},
                     {Compression::kBf16, "bf16"});
TORUS_API_ENUM_NAMES(RestartPolicy, {RestartPolicy::kNever, "Never"}, {RestartPolicy::kOnFailure, "OnFailure"},
                     {RestartPolicy::kExitCode, "ExitCode"});
TORUS_API_ENUM_NAMES(CleanPodPolicy, {CleanPodPolicy::kNone, "None"}, {CleanPodPolicy::kRunning, "Running"},
                     {CleanPodPolicy::kAll, "All"});
TORUS_API_ENUM_NAMES(TopologyPlacement, {TopologyPlacement::kPreferred, "Preferred"},
                     {TopologyPlacement::kRequired, "Required"}, {TopologyPlacement::kExclusive, "Exclusive"});
TORUS_API_ENUM_NAMES(Phase, {Phase::kPending, "Pending"}, {Phase::kInitializing, "Initializing"},
                     {Phase::kRunning, "Running"}, {Phase::kRestarting, "Restarting"}, {Phase::kSucceeded, "Succeeded"},
                     {Phase::kFailed, "Failed"}, {Phase::kSuspended, "Suspended"});
TORUS_API_ENUM_NAMES(ConditionStatus, {ConditionStatus::kTrue, "True"}, {ConditionStatus::kFalse, "False"},
                     {ConditionStatus::kUnknown, "Unknown"});
#undef TORUS_API_ENUM_NAMES

template <class E>
constexpr std::string_view to_string(E value) {
  for (const auto& [v, name] : EnumNames<E>::kValues) {
    if (v == value) return name;
  }
  return "?";
}

// nullopt when `text` is not one of the spellings (exact, case-sensitive, as Kubernetes enums are).
template <class E>
constexpr std::optional<E> parse_enum(std::string_view text) {
  for (const auto& [v, name] : EnumNames<E>::kValues) {
    if (name == text) return v;
  }
  return std::nullopt;
}

// `"a", "b", "c"`: for error messages that list what was expected.
template <class E>
std::string enum_choices() {
  std::string out;
  for (const auto& [v, name] : EnumNames<E>::kValues) {
    out += (out.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  }
  return out;
}

// ---- metadata (the subset of Kubernetes ObjectMeta Torus reads and writes) ----

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  std::optional<bool> controller;
  std::optional<bool> block_owner_deletion;
  bool operator==(const OwnerReference&) const = default;
};

struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;  // "namespace" in YAML
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string uid;
  std::string resource_version;
  std::optional<int64_t> generation;
  std::string creation_timestamp;
  std::string deletion_timestamp;
  std::vector<std::string> finalizers;
  std::vector<OwnerReference> owner_references;
  bool operator==(const ObjectMeta&) const = default;
};

// ---- spec ----

// The gang: `workers` pods, each running `processesPerWorker` ranks (one per GPU, or CPU processes).
struct GangSpec {
  std::optional<int32_t> workers;
  std::optional<int32_t> processes_per_worker;
  std::optional<Device> device;
  std::optional<int32_t> threads_per_process;  // CPU math threads per rank; unset: the CPUs a rank may use
  std::string image;
  nlohmann::json resources;     // Kubernetes ResourceRequirements of the worker container (opaque)
  nlohmann::json pod_template;  // "template": a Kubernetes PodTemplateSpec merged into each worker pod (opaque)
  bool operator==(const GangSpec&) const = default;
};

struct ModelSpec {
  std::optional<Arch> arch;
  // resnet9: [prep, layer1, layer2, layer3] channels; resnet18/34/50: the 4 stage base widths.
  std::vector<int32_t> widths;
  std::optional<Stem> stem;
  std::optional<int32_t> input_channels;
  std::optional<int32_t> num_classes;  // imagefolder: unset means one class per subfolder
  std::optional<Pooling> pooling;
  std::optional<bool> zero_init_residual;  // zero gamma of each residual block's last BN (Goyal et al.)
  bool operator==(const ModelSpec&) const = default;
};

struct SyntheticSpec {
  std::optional<int64_t> train_images;
  std::optional<int64_t> validation_images;
  std::optional<int32_t> num_classes;
  bool operator==(const SyntheticSpec&) const = default;
};

struct DataSpec {
  std::optional<Dataset> dataset;
  std::string path;
  std::optional<int32_t> image_size;  // training images are this square size unless a phase says otherwise
  std::optional<int32_t> loader_threads;
  SyntheticSpec synthetic;
  bool operator==(const DataSpec&) const = default;
};

struct OptimizerSpec {
  std::optional<OptimizerKind> type;
  std::optional<double> momentum;
  std::optional<bool> nesterov;
  std::optional<double> weight_decay;
  std::optional<bool> no_decay_on_norm_and_bias;
  bool operator==(const OptimizerSpec&) const = default;
};

// One corner of a piecewise-linear schedule; two points at the same epoch make a step.
struct LrPoint {
  std::optional<double> epoch;
  std::optional<double> lr;
  bool operator==(const LrPoint&) const = default;
};

struct LrScheduleSpec {
  std::optional<LrScheduleKind> type;
  // one-cycle: `initial` -> `peak` linearly over `warmupEpochs`, then linearly to `final` at the last epoch.
  std::optional<double> peak;
  std::optional<double> warmup_epochs;
  std::optional<double> initial;
  std::optional<double> final_lr;  // "final"
  // piecewise-linear: the LR at fractional epochs, held after the last point.
  std::vector<LrPoint> points;
  // When set, every LR above is for this global batch and scales linearly with the phase's batch (Goyal et al.).
  std::optional<int32_t> reference_batch_size;
  bool operator==(const LrScheduleSpec&) const = default;
};

// Progressive resizing: epochs [fromEpoch, toEpoch) train at `imageSize` with this batch.
struct PhaseSpec {
  std::optional<int32_t> from_epoch;
  std::optional<int32_t> to_epoch;
  std::optional<int32_t> image_size;
  std::optional<int32_t> batch_size;
  std::optional<int32_t> per_rank_batch_size;
  bool operator==(const PhaseSpec&) const = default;
};

struct AugmentationSpec {
  std::optional<bool> flip;
  std::optional<int32_t> crop_padding;
  std::optional<double> random_resized_crop_min_scale;  // unset: no random-resized crop
  bool operator==(const AugmentationSpec&) const = default;
};

struct CheckpointSpec {
  std::string dir;
  std::optional<int32_t> every_epochs;
  std::optional<int64_t> every_steps;
  std::optional<int32_t> keep;
  // A PersistentVolumeClaim template ({metadata, spec}, opaque): the operator creates the claim, owned by the job,
  // and mounts it at `dir` in the workers (rank 0 reads and writes the checkpoints).
  nlohmann::json volume_claim_template;
  // Where a new run starts when it has no checkpoint of its own (common/launch/checkpoint_layout.h): empty, step 0;
  // "latest", the newest checkpoint of any other run in `dir`; a run id (a TrainingJob's uid, a `torus run` id), that
  // run's newest. A run's own checkpoints (a restart) always come first.
  std::string resume_from;
  bool operator==(const CheckpointSpec&) const = default;
};

struct TrainingSpec {
  std::optional<int32_t> epochs;
  std::optional<int32_t> batch_size;  // global, over all ranks
  std::optional<int32_t> per_rank_batch_size;
  OptimizerSpec optimizer;
  LrScheduleSpec lr_schedule;
  std::optional<double> label_smoothing;
  std::optional<Precision> precision;
  std::vector<PhaseSpec> phases;
  std::optional<bool> rectangular_validation;
  std::optional<int32_t> validation_image_size;
  std::optional<double> target_accuracy;
  std::optional<int64_t> seed;
  AugmentationSpec augmentation;
  CheckpointSpec checkpoint;
  bool operator==(const TrainingSpec&) const = default;
};

struct GridSpec {
  std::optional<int32_t> x;
  std::optional<int32_t> y;
  bool operator==(const GridSpec&) const = default;
};

struct AllReduceSpec {
  std::optional<AllReduceAlgorithm> algorithm;
  std::optional<double> bucket_size_mb;
  std::optional<double> first_bucket_size_mb;
  std::optional<Compression> compression;
  GridSpec grid;  // torus2d: X ranks along the fast dimension times Y
  std::optional<int32_t> timeout_seconds;
  bool operator==(const AllReduceSpec&) const = default;
};

struct SchedulingPolicy {
  std::string scheduler_name;
  std::string pod_group;
  std::optional<int32_t> min_available;
  std::string queue;
  std::string priority_class;
  bool operator==(const SchedulingPolicy&) const = default;
};

struct TopologySpec {
  std::string key;  // a node label naming the rack/block, e.g. "topology.kubernetes.io/rack"
  std::optional<TopologyPlacement> placement;
  bool operator==(const TopologySpec&) const = default;
};

struct RunPolicy {
  std::optional<RestartPolicy> restart_policy;
  std::optional<int32_t> backoff_limit;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> running_deadline_seconds;  // from creation until every rank is Running
  std::optional<int32_t> ttl_seconds_after_finished;
  std::optional<CleanPodPolicy> clean_pod_policy;
  std::optional<bool> suspend;
  std::string managed_by;
  SchedulingPolicy scheduling_policy;
  TopologySpec topology;
  bool operator==(const RunPolicy&) const = default;
};

struct TrainingJobSpec {
  GangSpec gang;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  AllReduceSpec all_reduce;
  RunPolicy run_policy;
  std::optional<int32_t> metrics_port;
  std::optional<int32_t> rendezvous_port;
  bool operator==(const TrainingJobSpec&) const = default;
};

// ---- status (written by the operator / local runtime) ----

struct Condition {
  std::string type;
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;
  std::string message;
  std::string last_transition_time;
  std::optional<int64_t> observed_generation;
  bool operator==(const Condition&) const = default;
};

// Condition types the operator sets.
namespace condition {
inline constexpr std::string_view kCreated = "Created";
inline constexpr std::string_view kRunning = "Running";
inline constexpr std::string_view kRestarting = "Restarting";
inline constexpr std::string_view kSucceeded = "Succeeded";
inline constexpr std::string_view kFailed = "Failed";
inline constexpr std::string_view kSuspended = "Suspended";
// Jobs with runPolicy.topology.key: whether the workers get the node -> block map that orders the ring by rack.
inline constexpr std::string_view kRackOrdering = "RackOrdering";
// Workers that cannot start until something is fixed (an image the nodes cannot pull, a setting the kubelet refuses).
inline constexpr std::string_view kPodsWaiting = "PodsWaiting";
}  // namespace condition

struct WorkerCounts {
  int32_t ready = 0;
  int32_t active = 0;
  int32_t succeeded = 0;
  int32_t failed = 0;
  bool operator==(const WorkerCounts&) const = default;
};

struct Progress {
  int32_t epoch = 0;
  int64_t step = 0;
  double loss = 0;
  double accuracy = 0;  // last validation accuracy, 0..1
  double images_per_second = 0;
  int64_t eta_seconds = 0;
  double bus_bandwidth_gbps = 0;    // all-reduce bus bandwidth (nccl-tests definition), GB/s
  std::string allreduce_algorithm;  // the gang-wide algorithm that carried the most bytes ("ring", ...)
  std::string update_time;
  bool operator==(const Progress&) const = default;
};

// Seconds of rank 0's time by part of the goodput ledger (common/process/goodput.h; docs/observability.md).
struct GoodputSeconds {
  double startup = 0;    // process start to the trainer ready
  double comm_init = 0;  // of which the communicator's rendezvous and connections (Gloo, shared memory)
  double restore = 0;    // reading the checkpoint
  double training = 0;   // the steps' own work (kept: a restart's lost steps are taken out)
  double data_wait = 0;
  double comm_wait = 0;
  double evaluation = 0;
  double checkpoint = 0;
  bool operator==(const GoodputSeconds&) const = default;
};

// status.goodput: where the job's time went across its attempts, and the share that trained.
struct Goodput {
  double ratio = 0;              // seconds.training / wallSeconds
  double wall_seconds = 0;       // status.startTime to updateTime
  GoodputSeconds seconds;        // every attempt's, summed
  double scheduling_seconds = 0;  // every attempt's, from its first pod's creation to all its pods' containers started
  double lost_work_seconds = 0;   // steps redone after restarts x the step time then
  int64_t lost_steps = 0;
  double step_seconds = 0;          // rank 0's mean step time in the current attempt
  // The slowest checkpoint save measured in any attempt (rank 0's torus_worker_checkpoint_seconds, read as an upper
  // bound: operator/controller/goodput_status.h); the worker pods' terminationGracePeriodSeconds is derived from it.
  double slowest_checkpoint_seconds = 0;
  int32_t attempt = 0;              // the attempt the current figures come from
  int64_t last_step = 0;            // the last global step read from it
  GoodputSeconds earlier_attempts;  // the attempts before it, summed (what `seconds` adds the current one to)
  std::string update_time;
  bool operator==(const Goodput&) const = default;
};

struct CheckpointRef {
  std::string path;
  int32_t epoch = 0;
  int64_t step = 0;
  std::string time;
  bool operator==(const CheckpointRef&) const = default;
};

// The step an attempt resumed from, as its rank 0 reported it (0: it started fresh, no checkpoint).
struct ResumePoint {
  int32_t attempt = 0;
  int64_t step = 0;
  std::string path;    // the checkpoint file, when step > 0
  std::string run;     // the run that wrote it: this job's uid, or the run resumeFrom named
  std::string reason;  // launch::ResumeReason: Fresh, ThisRun, ResumeFrom
  std::string time;    // when the operator read it; empty: not read yet for this attempt
  bool operator==(const ResumePoint&) const = default;
};

struct RankPlacement {
  int32_t rank = 0;
  int32_t worker = 0;      // the pod's index in the gang
  int32_t local_rank = 0;  // the process's index inside the pod
  std::string pod;
  std::string node;
  std::string block;  // the node's runPolicy.topology.key label (rack), when the job has a key
  bool operator==(const RankPlacement&) const = default;
};

struct TrainingJobStatus {
  std::optional<Phase> phase;
  std::vector<Condition> conditions;
  std::optional<int64_t> observed_generation;
  int32_t attempt = 0;      // the gang's current attempt, 0 for the first
  int32_t restarts = 0;     // gang restarts after failures so far (what backoffLimit counts)
  int32_t disruptions = 0;  // gang restarts for disruptions (eviction, preemption, drain): no backoffLimit spent
  std::string start_time;
  std::string completion_time;
  WorkerCounts workers;
  Progress progress;
  CheckpointRef last_checkpoint;
  ResumePoint resumed_from;
  // The run the job's attempts train as (their checkpoints are in training.checkpoint.dir/<run>): empty, the job's
  // uid; after an edit of the model or the seed, which its checkpoints no longer fit, a new one (<uid>-g<generation>).
  std::string run;
  std::vector<RankPlacement> ranks;
  Goodput goodput;
  bool operator==(const TrainingJobStatus&) const = default;
};

struct TrainingJob {
  std::string api_version = std::string(kApiVersion);
  std::string kind = std::string(kKind);
  ObjectMeta metadata;
  TrainingJobSpec spec;
  TrainingJobStatus status;
  bool operator==(const TrainingJob&) const = default;
};

// The condition of `type`, or nullptr.
const Condition* find_condition(const TrainingJobStatus& status, std::string_view type);

// Sets (adds or updates) a condition; lastTransitionTime changes only when `status` changes, as Kubernetes expects.
// Returns true when anything changed.
bool set_condition(TrainingJobStatus& status, Condition condition);

}  // namespace torus::api

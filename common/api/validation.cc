#include "common/api/validation.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "common/api/defaults.h"
#include "common/api/resolve.h"
#include "common/launch/checkpoint_layout.h"

namespace torus::api {
namespace {

// Names become pod names "<name>-worker-<index>" (DNS-1123 labels, at most 63 characters): 48 leaves room.
// The job's headless Service takes the name itself, and Service names are DNS-1035 labels (a letter first).
constexpr size_t kMaxNameLength = 48;

std::string show(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}
std::string show(int64_t v) { return std::to_string(v); }
std::string show(int32_t v) { return std::to_string(v); }

bool is_dns1123_label(const std::string& s) {
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, kLabel);
}

bool is_dns1035_label(const std::string& s) {
  static const std::regex kLabel("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, kLabel);
}

bool is_label_name(const std::string& s) {
  static const std::regex kName("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$");
  return s.size() <= 63 && std::regex_match(s, kName);
}

bool is_dns1123_subdomain(const std::string& s) {
  static const std::regex kSubdomain("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  return s.size() <= 253 && std::regex_match(s, kSubdomain);
}

// "prefix/name" or "name", as Kubernetes label keys.
bool is_qualified_name(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) return is_label_name(s);
  return is_dns1123_subdomain(s.substr(0, slash)) && is_label_name(s.substr(slash + 1));
}

class Checker {
 public:
  explicit Checker(FieldErrors& out) : out_(out) {}

  void add(const std::string& path, std::string message) { out_.push_back({path, std::move(message)}); }

  template <class T>
  void required(const std::optional<T>& v, const std::string& path, const std::string& what) {
    if (!v) add(path, "is required: " + what);
  }

  // Integers with a lower (and optional upper) bound: "must be a positive integer, got -4".
  template <class T>
  void int_range(const std::optional<T>& v, const std::string& path, int64_t lo, int64_t hi = INT64_MAX) {
    if (!v || (*v >= lo && *v <= hi)) return;
    if (hi == INT64_MAX) {
      add(path, (lo == 1 ? std::string("must be a positive integer") : "must be an integer >= " + std::to_string(lo)) +
                    ", got " + show(*v));
    } else {
      add(path, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + show(*v));
    }
  }

  enum class Bound { kInclusive, kExclusive };
  void number_range(const std::optional<double>& v, const std::string& path, double lo, Bound lo_bound, double hi,
                    Bound hi_bound) {
    if (!v) return;
    const bool lo_ok = lo_bound == Bound::kInclusive ? *v >= lo : *v > lo;
    const bool hi_ok = std::isinf(hi) || (hi_bound == Bound::kInclusive ? *v <= hi : *v < hi);
    if (lo_ok && hi_ok && std::isfinite(*v)) return;
    std::string range = std::string(lo_bound == Bound::kInclusive ? "[" : "(") + show(lo) + ", ";
    range += std::isinf(hi) ? "inf)" : show(hi) + (hi_bound == Bound::kInclusive ? "]" : ")");
    add(path, "must be a number in " + range + ", got " + show(*v));
  }
  void non_negative(const std::optional<double>& v, const std::string& path) {
    number_range(v, path, 0, Bound::kInclusive, INFINITY, Bound::kExclusive);
  }
  void positive(const std::optional<double>& v, const std::string& path) {
    number_range(v, path, 0, Bound::kExclusive, INFINITY, Bound::kExclusive);
  }

 private:
  FieldErrors& out_;
};

using Bound = Checker::Bound;

void check_header(Checker& c, const TrainingJob& job) {
  if (job.api_version != kApiVersion) {
    c.add("apiVersion", "must be \"" + std::string(kApiVersion) + "\", got \"" + job.api_version + "\"");
  }
  if (job.kind != kKind) c.add("kind", "must be \"" + std::string(kKind) + "\", got \"" + job.kind + "\"");
}

void check_metadata(Checker& c, const ObjectMeta& m) {
  if (m.name.empty() && m.generate_name.empty()) c.add("metadata.name", "is required: the job's name");
  if (!m.name.empty() && (!is_dns1035_label(m.name) || m.name.size() > kMaxNameLength)) {
    c.add("metadata.name",
          "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending with a "
          "letter or digit: the job's Service takes this name) of at most " +
              std::to_string(kMaxNameLength) + " characters, got \"" + m.name + "\"");
  }
  if (!m.namespace_.empty() && !is_dns1123_label(m.namespace_)) {
    c.add("metadata.namespace", "must be a DNS-1123 label, got \"" + m.namespace_ + "\"");
  }
  for (const auto& [key, value] : m.labels) {
    if (!is_qualified_name(key)) c.add("metadata.labels[" + key + "]", "key must be a qualified name (prefix/name)");
    if (!value.empty() && !is_label_name(value)) {
      c.add("metadata.labels[" + key + "]",
            "value must be at most 63 alphanumerics, '-', '_' or '.', got \"" + value + "\"");
    }
  }
}

void check_gang(Checker& c, const GangSpec& g) {
  c.required(g.workers, "spec.gang.workers", "the number of worker pods");
  c.int_range(g.workers, "spec.gang.workers", 1, 4096);
  c.int_range(g.processes_per_worker, "spec.gang.processesPerWorker", 1, 64);
  c.int_range(g.threads_per_process, "spec.gang.threadsPerProcess", 1, 1024);
}

void check_model(Checker& c, const ModelSpec& m, const DataSpec& d) {
  c.required(m.arch, "spec.model.arch", "the network, one of " + enum_choices<Arch>());
  // ResNet-9 takes a prep width and 1-3 stage widths (airbench's narrow net is 64-256-256); the deeper
  // ResNets have exactly 4 stages.
  const bool resnet9 = m.arch == Arch::kResNet9;
  const size_t min_widths = resnet9 ? 2 : 4;
  if (!m.widths.empty() && (m.widths.size() < min_widths || m.widths.size() > 4)) {
    c.add("spec.model.widths", std::string("must list ") +
                                   (resnet9 ? "2 to 4 widths for resnet9" : "exactly 4 widths") + ", got " +
                                   std::to_string(m.widths.size()));
  }
  for (size_t i = 0; i < m.widths.size(); ++i) {
    c.int_range(std::optional<int32_t>(m.widths[i]), "spec.model.widths[" + std::to_string(i) + "]", 1, 8192);
  }
  c.int_range(m.input_channels, "spec.model.inputChannels", 1, 16);
  if (resnet9 && m.stem == Stem::kImageNet) {
    c.add("spec.model.stem",
          "resnet9 has no choice of stem (its 3x3 prep convolution is the cifar stem); imagenet is for resnet18/34/50");
  }
  if (resnet9 && m.zero_init_residual == true) {
    c.add("spec.model.zeroInitResidual",
          "resnet9's residual blocks end in BN + ReLU, where a zero gamma would stop their gradient for good; "
          "zero-init is for resnet18/34/50");
  }
  c.int_range(m.num_classes, "spec.model.numClasses", 2, 100000);
  if (!d.dataset) return;
  if (*d.dataset == Dataset::kFashionMnist && m.input_channels && *m.input_channels != 1) {
    c.add("spec.model.inputChannels", "must be 1 for fashion-mnist (grayscale), got " + show(*m.input_channels));
  }
  const bool rgb = *d.dataset == Dataset::kCifar10 || *d.dataset == Dataset::kImageFolder;
  if (rgb && m.input_channels && *m.input_channels != 3) {
    c.add("spec.model.inputChannels", "must be 3 for " + std::string(to_string(*d.dataset)) +
                                          " (its images are decoded as RGB), got " + show(*m.input_channels));
  }
  // Synthetic labels run to synthetic.numClasses - 1: a narrower head would fail in every rank after the gang started.
  if (*d.dataset == Dataset::kSynthetic && m.num_classes && d.synthetic.num_classes &&
      *m.num_classes < *d.synthetic.num_classes) {
    c.add("spec.model.numClasses", "must be at least data.synthetic.numClasses (" + show(*d.synthetic.num_classes) +
                                       "), got " + show(*m.num_classes));
  }
  const bool ten_classes = *d.dataset == Dataset::kFashionMnist || *d.dataset == Dataset::kCifar10;
  if (ten_classes && m.num_classes && *m.num_classes != 10) {
    c.add("spec.model.numClasses",
          "must be 10 for " + std::string(to_string(*d.dataset)) + ", got " + show(*m.num_classes));
  }
}

void check_data(Checker& c, const DataSpec& d, const DataSpec& given) {
  c.required(d.dataset, "spec.data.dataset", "the data set");
  c.int_range(d.image_size, "spec.data.imageSize", 8, 1024);
  c.int_range(d.loader_threads, "spec.data.loaderThreads", 1, 256);
  c.int_range(d.synthetic.train_images, "spec.data.synthetic.trainImages", 1);
  c.int_range(d.synthetic.validation_images, "spec.data.synthetic.validationImages", 1);
  c.int_range(d.synthetic.num_classes, "spec.data.synthetic.numClasses", 2, 100000);
  if (!d.dataset) return;
  const bool needs_path = *d.dataset == Dataset::kCifar10 || *d.dataset == Dataset::kImageFolder;
  if (needs_path && d.path.empty()) {
    c.add("spec.data.path", "is required for dataset " + std::string(to_string(*d.dataset)) +
                                (*d.dataset == Dataset::kCifar10 ? " (the folder of the binary batches)"
                                                                 : " (the folder holding train/ and val/)"));
  }
  if (*d.dataset != Dataset::kSynthetic && given.synthetic != SyntheticSpec{}) {
    c.add("spec.data.synthetic", "is only for dataset synthetic, got dataset " + std::string(to_string(*d.dataset)));
  }
}

void check_lr_schedule(Checker& c, const TrainingSpec& t) {
  const LrScheduleSpec& s = t.lr_schedule;
  const std::string p = "spec.training.lrSchedule";
  c.positive(s.peak, p + ".peak");
  c.non_negative(s.warmup_epochs, p + ".warmupEpochs");
  c.non_negative(s.initial, p + ".initial");
  c.non_negative(s.final_lr, p + ".final");
  c.int_range(s.reference_batch_size, p + ".referenceBatchSize", 1);
  for (size_t i = 0; i < s.points.size(); ++i) {
    const std::string pi = p + ".points[" + std::to_string(i) + "]";
    c.required(s.points[i].epoch, pi + ".epoch", "the epoch of this point");
    c.required(s.points[i].lr, pi + ".lr", "the learning rate at this point");
    c.non_negative(s.points[i].epoch, pi + ".epoch");
    c.non_negative(s.points[i].lr, pi + ".lr");
    if (i > 0 && s.points[i].epoch && s.points[i - 1].epoch && *s.points[i].epoch < *s.points[i - 1].epoch) {
      c.add(pi + ".epoch", "points must be in epoch order: " + show(*s.points[i].epoch) + " comes after " +
                               show(*s.points[i - 1].epoch));
    }
  }
  if (!s.type) return;
  if (*s.type == LrScheduleKind::kOneCycle) {
    if (!s.peak) c.add(p + ".peak", "is required for a one-cycle schedule: the highest learning rate");
    if (!s.points.empty()) c.add(p + ".points", "is only for type piecewise-linear");
    if (s.warmup_epochs && t.epochs && *s.warmup_epochs >= *t.epochs) {
      c.add(p + ".warmupEpochs", "must be less than training.epochs (" + show(*t.epochs) +
                                     ": the schedule decays after the warm-up), got " + show(*s.warmup_epochs));
    }
  } else {
    if (s.points.empty()) c.add(p + ".points", "is required for a piecewise-linear schedule: at least one point");
    for (const auto& [value, name] : {std::pair{s.peak, "peak"},
                                      {s.warmup_epochs, "warmupEpochs"},
                                      {s.initial, "initial"},
                                      {s.final_lr, "final"}}) {
      if (value) c.add(p + "." + name, "is only for type one-cycle (piecewise-linear uses points)");
    }
  }
}

// A global batch must split evenly over the ranks.
void check_divisible(Checker& c, const std::optional<int32_t>& batch, const std::string& path, int32_t world) {
  if (batch && *batch > 0 && world > 0 && *batch % world != 0) {
    c.add(path, "must be divisible by the world size " + show(world) + " (workers x processesPerWorker), got " +
                    show(*batch));
  }
}

void check_phases(Checker& c, const TrainingSpec& t, std::optional<int32_t> world) {
  for (size_t i = 0; i < t.phases.size(); ++i) {
    const PhaseSpec& ph = t.phases[i];
    const std::string p = "spec.training.phases[" + std::to_string(i) + "]";
    c.required(ph.from_epoch, p + ".fromEpoch", "the first epoch of the phase");
    c.required(ph.to_epoch, p + ".toEpoch", "the epoch after the phase's last");
    c.int_range(ph.from_epoch, p + ".fromEpoch", 0);
    c.int_range(ph.to_epoch, p + ".toEpoch", 1);
    c.int_range(ph.image_size, p + ".imageSize", 8, 1024);
    c.int_range(ph.batch_size, p + ".batchSize", 1);
    c.int_range(ph.per_rank_batch_size, p + ".perRankBatchSize", 1);
    if (ph.batch_size && ph.per_rank_batch_size) {
      c.add(p + ".batchSize", "give batchSize or perRankBatchSize, not both");
    }
    if (world) check_divisible(c, ph.batch_size, p + ".batchSize", *world);
    if (ph.from_epoch && ph.to_epoch && *ph.to_epoch <= *ph.from_epoch) {
      c.add(p + ".toEpoch", "must be greater than fromEpoch (" + show(*ph.from_epoch) + "), got " + show(*ph.to_epoch));
    }
    const int32_t expected_from = i == 0 ? 0 : t.phases[i - 1].to_epoch.value_or(-1);
    if (ph.from_epoch && expected_from >= 0 && *ph.from_epoch != expected_from) {
      c.add(p + ".fromEpoch", std::string("phases must be in order and leave no gap: expected ") + show(expected_from) +
                                  (i == 0 ? " (the first epoch)" : " (the previous toEpoch)") + ", got " +
                                  show(*ph.from_epoch));
    }
  }
  if (!t.phases.empty() && t.epochs && t.phases.back().to_epoch && *t.phases.back().to_epoch != *t.epochs) {
    c.add(
        "spec.training.phases[" + std::to_string(t.phases.size() - 1) + "].toEpoch",
        "the last phase must end at training.epochs (" + show(*t.epochs) + "), got " + show(*t.phases.back().to_epoch));
  }
}

// The claim the operator makes and mounts at checkpoint.dir: a mount path, and a spec a claim can be made from.
void check_claim_template(Checker& c, const CheckpointSpec& k) {
  const std::string p = "spec.training.checkpoint.volumeClaimTemplate";
  const nlohmann::json& t = k.volume_claim_template;
  if (k.dir.empty() || k.dir.front() != '/') {
    c.add(
        "spec.training.checkpoint.dir",
        "must be an absolute path when volumeClaimTemplate is set (the claim is mounted there), got \"" + k.dir + "\"");
  }
  if (!t.is_object() || !t.contains("spec") || !t["spec"].is_object()) {
    c.add(p + ".spec", "is required: a PersistentVolumeClaim spec (accessModes, resources.requests.storage)");
    return;
  }
  const nlohmann::json& spec = t["spec"];
  const auto resources = spec.find("resources");
  const bool sized = resources != spec.end() && resources->is_object() && resources->contains("requests") &&
                     (*resources)["requests"].is_object() && (*resources)["requests"].contains("storage");
  if (!sized) {
    c.add(p + ".spec.resources.requests.storage", "is required: the claim's size, e.g. 10Gi");
  }
}

void check_checkpoint(Checker& c, const CheckpointSpec& k, RestartPolicy restart) {
  const std::string p = "spec.training.checkpoint";
  c.int_range(k.every_epochs, p + ".everyEpochs", 1);
  c.int_range(k.every_steps, p + ".everySteps", 1);
  c.int_range(k.keep, p + ".keep", 1);
  if (k.dir.empty() && restart != RestartPolicy::kNever) {
    c.add(p + ".dir", "is required when runPolicy.restartPolicy is " + std::string(to_string(restart)) +
                          ": a restarted gang resumes from its last checkpoint");
  }
  if (k.dir.empty() && (k.every_epochs || k.every_steps || k.keep)) {
    c.add(p + ".dir", "is required when checkpoint.everyEpochs, everySteps or keep is set");
  }
  if (!k.volume_claim_template.is_null()) check_claim_template(c, k);
  if (!k.resume_from.empty()) {
    if (k.dir.empty())
      c.add(p + ".dir", "is required when checkpoint.resumeFrom is set: the runs' checkpoints are there");
    const std::string problem = launch::run_id_problem(k.resume_from);
    if (k.resume_from != launch::kResumeLatest && !problem.empty()) {
      c.add(p + ".resumeFrom", "expected \"latest\" or a run id (" + problem + "), got \"" + k.resume_from + "\"");
    }
  }
}

void check_training(Checker& c, const TrainingSpec& t, const TrainingSpec& given, std::optional<int32_t> world,
                    RestartPolicy restart) {
  const std::string p = "spec.training";
  c.required(t.epochs, p + ".epochs", "the number of epochs");
  c.int_range(t.epochs, p + ".epochs", 1, 10000);
  c.int_range(t.batch_size, p + ".batchSize", 1);
  c.int_range(t.per_rank_batch_size, p + ".perRankBatchSize", 1);
  if (t.batch_size && t.per_rank_batch_size) {
    c.add(p + ".batchSize", "give batchSize (global) or perRankBatchSize, not both");
  } else if (!t.batch_size && !t.per_rank_batch_size) {
    c.add(p + ".batchSize", "is required: batchSize (global) or perRankBatchSize");
  }
  if (world) check_divisible(c, t.batch_size, p + ".batchSize", *world);
  c.number_range(t.optimizer.momentum, p + ".optimizer.momentum", 0, Bound::kInclusive, 1, Bound::kExclusive);
  c.non_negative(t.optimizer.weight_decay, p + ".optimizer.weightDecay");
  check_lr_schedule(c, t);
  c.number_range(t.label_smoothing, p + ".labelSmoothing", 0, Bound::kInclusive, 1, Bound::kExclusive);
  check_phases(c, t, world);
  c.int_range(t.validation_image_size, p + ".validationImageSize", 8, 1024);
  c.number_range(t.target_accuracy, p + ".targetAccuracy", 0, Bound::kExclusive, 1, Bound::kInclusive);
  c.int_range(t.seed, p + ".seed", 0);
  c.int_range(t.augmentation.crop_padding, p + ".augmentation.cropPadding", 0, 64);
  c.number_range(t.augmentation.random_resized_crop_min_scale, p + ".augmentation.randomResizedCropMinScale", 0,
                 Bound::kExclusive, 1, Bound::kInclusive);
  if (t.augmentation.random_resized_crop_min_scale && t.augmentation.crop_padding.value_or(0) > 0) {
    c.add(p + ".augmentation.cropPadding",
          "pad-and-crop and random-resized crop are alternatives: give cropPadding or randomResizedCropMinScale, "
          "not both");
  }
  check_checkpoint(c, given.checkpoint, restart);
}

void check_all_reduce(Checker& c, const AllReduceSpec& a, const AllReduceSpec& given, std::optional<int32_t> world) {
  const std::string p = "spec.allReduce";
  c.positive(a.bucket_size_mb, p + ".bucketSizeMB");
  c.positive(a.first_bucket_size_mb, p + ".firstBucketSizeMB");
  if (a.bucket_size_mb && a.first_bucket_size_mb && *a.first_bucket_size_mb > *a.bucket_size_mb &&
      *a.bucket_size_mb > 0) {
    c.add(p + ".firstBucketSizeMB",
          "must not exceed bucketSizeMB (" + show(*a.bucket_size_mb) + "), got " + show(*a.first_bucket_size_mb));
  }
  c.int_range(a.grid.x, p + ".grid.x", 1);
  c.int_range(a.grid.y, p + ".grid.y", 1);
  c.int_range(a.timeout_seconds, p + ".timeoutSeconds", 1);
  const bool torus = a.algorithm == AllReduceAlgorithm::kTorus2d;
  if (given.grid != GridSpec{} && !torus) c.add(p + ".grid", "is only for algorithm torus2d");
  if (torus && (a.grid.x.has_value() != a.grid.y.has_value())) c.add(p + ".grid", "give both x and y");
  if (torus && a.grid.x && a.grid.y && (*a.grid.x < 2 || *a.grid.y < 2)) {
    c.add(p + ".grid", "torus2d needs at least 2 x 2 ranks (x along the fast dimension, y rows), got " +
                           show(*a.grid.x) + " x " + show(*a.grid.y) + "; use ring or hierarchical");
  }
  if (torus && a.grid.x && a.grid.y && world && *a.grid.x > 0 && *a.grid.y > 0 &&
      int64_t{*a.grid.x} * *a.grid.y != *world) {
    c.add(p + ".grid",
          "x * y must equal the world size " + show(*world) + ", got " + show(*a.grid.x) + " x " + show(*a.grid.y));
  }
}

// minAvailable and queue act through the PodGroup the operator makes for a gang scheduler (children.cc); where
// none reads them (no scheduler, the user's own group, a scheduler without queues) the job is refused, not run as
// if they were honoured. `given`: as written (minAvailable defaults to the workers).
void check_scheduling(Checker& c, const SchedulingPolicy& given) {
  const std::string p = "spec.runPolicy.schedulingPolicy";
  const bool own_group = !given.pod_group.empty();
  if (given.min_available && (given.scheduler_name.empty() || own_group)) {
    c.add(p + ".minAvailable",
          own_group ? "podGroup names your own PodGroup, whose minMember is yours to set: unset minAvailable"
                    : "is the minMember of the PodGroup the operator makes for a gang scheduler, and no "
                      "schedulerName names one (the default scheduler places pods one by one and reads no "
                      "minimum): set schedulerName, or unset minAvailable");
  }
  // Volcano's PodGroup is the one with a queue; the coscheduling plugin's has none.
  if (!given.queue.empty() && (given.scheduler_name != "volcano" || own_group)) {
    c.add(p + ".queue",
          own_group ? "podGroup names your own PodGroup: set its queue there, and unset queue"
                    : "only Volcano's PodGroup has a queue (schedulerName: volcano), and schedulerName is " +
                          (given.scheduler_name.empty() ? std::string("unset") : "\"" + given.scheduler_name + "\"") +
                          ": nothing would read it");
  }
}

// A GPU worker pod gets one GPU per process (children.cc): a request of another count is refused rather than
// replaced.
void check_gpu_request(Checker& c, const GangSpec& g) {
  if (g.device != Device::kGpu || !g.resources.is_object()) return;
  const std::string gpus = std::to_string(g.processes_per_worker.value_or(1));
  for (const char* kind : {"requests", "limits"}) {
    const auto part = g.resources.find(kind);
    if (part == g.resources.end() || !part->is_object() || !part->contains("nvidia.com/gpu")) continue;
    const nlohmann::json& v = (*part)["nvidia.com/gpu"];
    const std::string asked = v.is_string() ? v.get<std::string>() : v.dump();
    if (asked != gpus) {
      c.add(std::string("spec.gang.resources.") + kind + ".nvidia.com/gpu",
            "a GPU worker pod gets one GPU per process (gang.processesPerWorker " + gpus +
                "): set processesPerWorker to the GPUs a pod should have, or leave the GPUs out of resources, got " +
                asked);
    }
  }
}

void check_run_policy(Checker& c, const RunPolicy& r, const GangSpec& g) {
  const std::string p = "spec.runPolicy";
  c.int_range(r.backoff_limit, p + ".backoffLimit", 0);
  c.int_range(r.active_deadline_seconds, p + ".activeDeadlineSeconds", 1);
  c.int_range(r.running_deadline_seconds, p + ".runningDeadlineSeconds", 1);
  c.int_range(r.ttl_seconds_after_finished, p + ".ttlSecondsAfterFinished", 0);
  static const std::regex kManagedBy("^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$");
  if (!r.managed_by.empty() && (r.managed_by.size() > 63 || !std::regex_match(r.managed_by, kManagedBy))) {
    c.add(p + ".managedBy",
          "must be a domain-prefixed path like \"kueue.x-k8s.io/multikueue\" of at most 63 "
          "characters, got \"" +
              r.managed_by + "\"");
  }
  c.int_range(r.scheduling_policy.min_available, p + ".schedulingPolicy.minAvailable", 1);
  if (r.scheduling_policy.min_available && g.workers && *r.scheduling_policy.min_available > *g.workers) {
    c.add(p + ".schedulingPolicy.minAvailable",
          "must not exceed gang.workers (" + show(*g.workers) + "), got " + show(*r.scheduling_policy.min_available));
  }
  if (!r.topology.key.empty() && !is_qualified_name(r.topology.key)) {
    c.add(p + ".topology.key",
          "must be a node label key like \"topology.kubernetes.io/rack\", got \"" + r.topology.key + "\"");
  }
  if (r.topology.key.empty() && r.topology.placement) {
    c.add(p + ".topology.key", "is required when topology.placement is set: the node label naming racks or blocks");
  }
}

// Local rank k of a pod serves /metrics on metricsPort + k: every one of them is a port, and none is the rendezvous.
void check_rank_ports(Checker& c, const TrainingJobSpec& s) {
  if (!s.metrics_port || !s.rendezvous_port) return;
  if (*s.metrics_port < 1 || *s.metrics_port > 65535) return;  // already said
  const int32_t local = std::max<int32_t>(1, s.gang.processes_per_worker.value_or(1));
  const int64_t last = int64_t{*s.metrics_port} + local - 1;
  if (local > 1 && last > 65535) {
    c.add("spec.metricsPort", "local rank k serves metricsPort + k: with processesPerWorker " + show(local) +
                                  " the ports up to " + show(last) + " must be at most 65535, got " +
                                  show(*s.metrics_port));
  }
  if (*s.rendezvous_port < *s.metrics_port || *s.rendezvous_port > last) return;
  if (local == 1) {
    c.add("spec.rendezvousPort", "must differ from metricsPort (" + show(*s.metrics_port) + ")");
  } else {
    c.add("spec.rendezvousPort", "must not be one of the local ranks' metrics ports " + show(*s.metrics_port) + ".." +
                                     show(last) + " (local rank k serves metricsPort + k), got " +
                                     show(*s.rendezvous_port));
  }
}

void check_cross(Checker& c, const TrainingJobSpec& s) {
  if (s.training.precision && *s.training.precision != Precision::kFp32 && s.gang.device == Device::kCpu) {
    c.add("spec.training.precision", "the CPU engine trains in fp32 (it has no " +
                                         std::string(to_string(*s.training.precision)) +
                                         " path): use fp32, or gang.device gpu");
  }
  // GPU gradients are averaged by NCCL over one communicator (ncclAllReduce picks its own ring or tree): the host
  // algorithms and their grid do not act there, so a job asking for them is refused rather than silently ignored.
  if (s.all_reduce.algorithm && s.gang.device == Device::kGpu && *s.all_reduce.algorithm != AllReduceAlgorithm::kAuto) {
    c.add("spec.allReduce.algorithm",
          "GPU workers average gradients with NCCL, which picks its own ring or tree per "
          "message (it takes no algorithm from the job); " +
              std::string(to_string(*s.all_reduce.algorithm)) + " acts on gang.device cpu only: use auto");
  }
  if (s.gang.threads_per_process && s.gang.device == Device::kGpu) {
    c.add("spec.gang.threadsPerProcess", "sets the CPU engine's math threads; a GPU rank computes on its device: unset "
                                         "it for gang.device gpu, got " + show(*s.gang.threads_per_process));
  }
  if (s.all_reduce.compression && *s.all_reduce.compression != Compression::kNone && s.gang.device == Device::kGpu) {
    c.add("spec.allReduce.compression",
          "GPU workers all-reduce fp32 gradients with NCCL; compression applies to gang.device cpu, got " +
              std::string(to_string(*s.all_reduce.compression)));
  }
  if (s.training.rectangular_validation == true && s.data.dataset && *s.data.dataset != Dataset::kImageFolder) {
    c.add("spec.training.rectangularValidation", "is only for dataset imagefolder (the others are square)");
  }
  c.int_range(s.metrics_port, "spec.metricsPort", 1, 65535);
  c.int_range(s.rendezvous_port, "spec.rendezvousPort", 1, 65535);
  check_rank_ports(c, s);
}

// The world size when the gang is valid enough to have one.
std::optional<int32_t> valid_world(const GangSpec& g) {
  if (!g.workers || *g.workers < 1 || g.processes_per_worker.value_or(1) < 1) return std::nullopt;
  return *g.workers * g.processes_per_worker.value_or(1);
}

bool under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  return path.compare(0, prefix.size(), prefix) == 0 &&
         (path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[');
}

}  // namespace

FieldErrors validate(const TrainingJob& job) {
  const TrainingJob d = with_defaults(job);
  FieldErrors errors;
  Checker c(errors);
  const auto world = valid_world(d.spec.gang);
  check_header(c, d);
  check_metadata(c, d.metadata);
  check_gang(c, d.spec.gang);
  check_model(c, d.spec.model, d.spec.data);
  check_data(c, d.spec.data, job.spec.data);
  check_training(c, d.spec.training, job.spec.training, world,
                 d.spec.run_policy.restart_policy.value_or(RestartPolicy::kNever));
  check_all_reduce(c, d.spec.all_reduce, job.spec.all_reduce, world);
  check_run_policy(c, d.spec.run_policy, d.spec.gang);
  check_scheduling(c, job.spec.run_policy.scheduling_policy);
  check_gpu_request(c, d.spec.gang);
  check_cross(c, d.spec);
  return errors;
}

FieldErrors check_decoded(const Decoded& decoded) {
  FieldErrors out = decoded.errors;
  const bool whole_document = std::any_of(out.begin(), out.end(), [](const FieldError& e) { return e.path.empty(); });
  if (!whole_document) {  // else not a TrainingJob at all: nothing more to say
    for (auto& e : validate(decoded.job)) {
      bool about_failed_field = false;
      for (const auto& d : decoded.errors) about_failed_field = about_failed_field || under(e.path, d.path);
      if (!about_failed_field) out.push_back(std::move(e));
    }
  }
  decoded.sources.locate(out);  // validation knows fields, not lines: the lines are attached here
  return out;
}

FieldErrors check_file(const std::string& path) { return check_decoded(decode_file(path)); }

TrainingJob load_job_file(const std::string& path) {
  Decoded decoded = decode_file(path);
  const FieldErrors errors = check_decoded(decoded);
  if (!errors.empty()) throw_field_errors(errors, path);
  return with_defaults(std::move(decoded.job));
}

TrainingJob load_job_yaml(std::string_view text, std::string_view source) {
  Decoded decoded = decode_yaml(text);
  const FieldErrors errors = check_decoded(decoded);
  if (!errors.empty()) throw_field_errors(errors, source);
  return with_defaults(std::move(decoded.job));
}

}  // namespace torus::api

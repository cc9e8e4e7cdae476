#include "worker/train/run_options.h"

#include <sstream>

#include "common/api/resolve.h"
#include "common/util/error.h"
#include "worker/train/job_config.h"
#include "worker/train/precision.h"

namespace torus::worker::train {
namespace {

size_t mebibytes(double mb) { return static_cast<size_t>(mb * (1 << 20)); }

template <class E>
E parse_override(const std::string& variable, const std::string& value) {
  if (auto v = api::parse_enum<E>(value)) return *v;
  throw InvalidArgument("environment variable " + variable + ": expected one of " + api::enum_choices<E>() + ", got '" +
                        value + "'");
}

class Overrider {
 public:
  Overrider(const tunables::Snapshot& env, std::vector<AppliedOverride>& applied) : env_(env), applied_(applied) {}

  template <class E>
  void enumeration(E& target, const char* variable) {
    const auto v = env_.text(variable);
    if (!v) return;
    const std::string before(api::to_string(target));
    target = parse_override<E>(variable, *v);
    record(variable, *v, before);
  }

  void integer(int& target, const char* variable, const std::string& job_value) {
    const auto v = env_.integer(variable);
    if (!v) return;
    target = static_cast<int>(*v);
    record(variable, std::to_string(*v), job_value);
  }

  void millis(std::chrono::milliseconds& target, const char* variable) {
    const auto v = env_.integer(variable);
    if (!v) return;
    if (*v <= 0) throw InvalidArgument(std::string("environment variable ") + variable + ": must be positive");
    const std::string before = std::to_string(target.count() / 1000) + " s";
    target = std::chrono::milliseconds(*v);
    record(variable, std::to_string(*v), before);
  }

 private:
  void record(const char* variable, const std::string& value, const std::string& job_value) {
    applied_.push_back({variable, value, std::string(tunables::declared(variable).overrides), job_value});
  }

  const tunables::Snapshot& env_;
  std::vector<AppliedOverride>& applied_;
};

CommRunOptions comm_options(const api::AllReduceSpec& a, Overrider& env) {
  CommRunOptions c;
  c.algorithm = a.algorithm.value_or(api::AllReduceAlgorithm::kAuto);
  c.grid_x = a.grid.x.value_or(0);
  c.timeout = std::chrono::seconds(a.timeout_seconds.value_or(300));
  c.compression = a.compression.value_or(api::Compression::kNone);
  if (a.first_bucket_size_mb) c.first_bucket_bytes = mebibytes(*a.first_bucket_size_mb);
  if (a.bucket_size_mb) c.bucket_cap_bytes = mebibytes(*a.bucket_size_mb);
  env.enumeration(c.algorithm, "TORUS_ALLREDUCE_ALGO");
  env.integer(c.grid_x, "TORUS_TORUS_X", c.grid_x == 0 ? "automatic" : std::to_string(c.grid_x));
  env.millis(c.timeout, "TORUS_COMM_TIMEOUT_MS");
  env.enumeration(c.compression, "TORUS_COMPRESSION");
  return c;
}

std::string mib(size_t bytes) {
  std::ostringstream os;
  os << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string model_line(const nn::ModelConfig& m) {
  std::string widths;
  for (int64_t w : m.widths) widths += (widths.empty() ? "" : ", ") + std::to_string(w);
  return "model: " + std::string(api::to_string(m.arch)) + ", widths [" + widths + "], stem " +
         std::string(api::to_string(m.stem)) + ", pooling " + (m.head_pool == PoolKind::kAvg ? "avg" : "max") +
         ", zero-init residual " + (m.zero_init_residual == nn::ZeroInitResidual::kOn ? "on" : "off") + ", classes " +
         (m.num_classes > 0 ? std::to_string(m.num_classes) : std::string("one per class folder"));
}

std::string data_line(const DataConfig& d) {
  const data::Transform& t = d.transform;
  std::string crop = "none";
  if (t.train_crop == data::TrainCrop::kPadCrop) crop = "pad " + std::to_string(t.pad) + " and crop";
  if (t.train_crop == data::TrainCrop::kRandomResizedCrop) crop = "random-resized, min scale " + number(t.scale_min);
  const std::string synthetic = d.dataset == api::Dataset::kSynthetic
                                    ? " (" + std::to_string(d.synthetic_train) + " training and " +
                                          std::to_string(d.synthetic_val) + " validation images, " +
                                          std::to_string(d.synthetic_channels) + " channel(s))"
                                    : "";
  return "data: " + std::string(api::to_string(d.dataset)) + synthetic + ", loader threads " +
         std::to_string(d.loader_threads) + ", flip " + (t.flip == data::Flip::kHorizontal ? "on" : "off") + ", crop " +
         crop + ", validation image " +
         (d.validation_image_size > 0 ? std::to_string(d.validation_image_size) : std::string("native")) +
         (d.rectangular_validation == data::Rectangular::kOn ? " (rectangular)" : "");
}

std::string optimizer_line(const TrainConfig& t) {
  return "optimizer: sgd, momentum " + number(t.sgd.momentum) + ", nesterov " +
         (t.sgd.nesterov == math::Nesterov::kOn ? "on" : "off") + ", weight decay " + number(t.sgd.weight_decay) +
         (t.sgd.decay_scope == optim::DecayScope::kWeightsOnly ? " (conv and linear weights only)" : " (all)") +
         ", label smoothing " + number(t.label_smoothing);
}

std::string lr_line(const TrainConfig& t) {
  std::string out = "learning rate through (epoch, lr):";
  for (const optim::LrPoint& p : t.lr_points) out += " (" + number(p.epoch) + ", " + number(p.lr) + ")";
  if (t.lr_reference_batch > 0) out += ", times the phase's global batch / " + std::to_string(t.lr_reference_batch);
  if (t.target_accuracy > 0) out += "; stop at top-1 " + number(t.target_accuracy);
  return out;
}

}  // namespace

RunOptions run_options(const api::TrainingJobSpec& spec, int world_size, const tunables::Snapshot& env) {
  RunOptions r;
  r.train = to_train_config(spec, world_size);
  Overrider overrider(env, r.overrides);
  r.comm = comm_options(spec.all_reduce, overrider);
  r.engine.device = spec.gang.device.value_or(api::Device::kCpu);
  r.engine.precision = spec.training.precision.value_or(api::Precision::kFp32);
  r.train.precision = r.engine.precision;
  r.engine.threads = spec.gang.threads_per_process.value_or(0);
  r.engine.seed = r.train.seed;
  r.tunables = env.describe();
  return r;
}

std::string describe(const AppliedOverride& o) {
  return o.variable + "=" + o.value + " overrides " + o.field + " (job: " + o.job_value + ")";
}

std::vector<std::string> describe(const RunOptions& run, int world_size) {
  const TrainConfig& t = run.train;
  std::vector<std::string> out;
  out.push_back("world: " + std::to_string(world_size) + " rank(s)");
  out.push_back(model_line(t.model));
  out.push_back(data_line(t.data));
  out.push_back(optimizer_line(t));
  out.push_back(lr_line(t));
  for (size_t i = 0; i < t.phases.size(); ++i) {
    const api::ResolvedPhase& p = t.phases[i];
    out.push_back("phase " + std::to_string(i) + ": epochs [" + std::to_string(p.from_epoch) + ", " +
                  std::to_string(p.to_epoch) + "), per-rank batch " + std::to_string(p.per_rank_batch) + ", image " +
                  std::to_string(p.image_size));
  }
  out.push_back("engine: " + std::string(api::to_string(run.engine.device)) + ", precision " +
                std::string(api::to_string(run.engine.precision)) + ", threads " +
                (run.engine.threads > 0 ? std::to_string(run.engine.threads) : std::string("automatic")));
  out.push_back("precision: " + describe(precision_plan(t.precision)));
  out.push_back("seed: " + std::to_string(run.engine.seed) + " (weights and data order)");
  out.push_back("checkpoints: " +
                (t.checkpoint.dir.empty()
                     ? std::string("off")
                     : t.checkpoint.dir + ", every " +
                           (t.checkpoint.every_steps > 0 ? std::to_string(t.checkpoint.every_steps) + " steps"
                                                         : std::to_string(t.checkpoint.every_epochs) + " epoch(s)") +
                           ", keep " + std::to_string(t.checkpoint.keep)));
  out.push_back("all-reduce: " + std::string(api::to_string(run.comm.algorithm)) + ", compression " +
                std::string(api::to_string(run.comm.compression)) + ", buckets " + mib(run.comm.first_bucket_bytes) +
                " first then " + mib(run.comm.bucket_cap_bytes) + ", collective timeout " +
                std::to_string(run.comm.timeout.count()) + " ms");
  if (run.overrides.empty()) out.push_back("environment overrides: none");
  for (const AppliedOverride& o : run.overrides) out.push_back("environment override: " + describe(o));
  if (!run.tunables.empty()) {
    std::string set;
    for (const std::string& tunable : run.tunables) set += (set.empty() ? "" : ", ") + tunable;
    out.push_back("developer tunables set: " + set + " (docs/tunables.md)");
  }
  return out;
}

}  // namespace torus::worker::train

#include "worker/app/run_options.h"

#include <sstream>

#include "common/api/resolve.h"
#include "common/util/error.h"
#include "worker/app/job_config.h"

namespace torus::worker::app {
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

// The telemetry's share: who this rank is (launch contract) and what the run plans (the job).
TelemetryOptions telemetry_options(const api::TrainingJobSpec& spec, const launch::RankEnv& rank_env) {
  TelemetryOptions o;
  o.job = rank_env.job_name;
  o.ns = rank_env.ns;
  o.rank = rank_env.rank;
  o.world_size = rank_env.world_size;
  o.attempt = rank_env.attempt;
  o.run = rank_env.run_id;
  o.epochs = spec.training.epochs.value_or(0);
  const auto phases = api::resolve_phases(spec);
  if (!phases.empty()) {
    o.global_batch = phases.front().global_batch;
    o.per_rank_batch = phases.front().per_rank_batch;
    o.image_size = phases.front().image_size;
  }
  if (auto n = api::known_train_images(spec.data)) o.total_steps = api::total_steps(phases, *n);
  o.target_accuracy = spec.training.target_accuracy.value_or(0);
  if (!rank_env.bind_address.empty()) o.metrics_host = rank_env.bind_address;
  const int port = rank_env.metrics_port.value_or(spec.metrics_port.value_or(-1));
  if (port >= 0) o.metrics_port = static_cast<uint16_t>(port);
  return o;
}

}  // namespace

RunOptions run_options(const api::TrainingJobSpec& spec, const launch::RankEnv& rank, const tunables::Snapshot& env) {
  RunOptions r;
  r.rank = rank.rank;
  r.world_size = rank.world_size;
  r.train = to_train_config(spec, rank.world_size);
  r.train.checkpoint.resume_step = rank.resume_step;
  r.train.checkpoint.run = rank.run_id;
  Overrider overrider(env, r.overrides);
  r.comm = comm_options(spec.all_reduce, overrider);
  r.engine.device = spec.gang.device.value_or(api::Device::kCpu);
  r.engine.precision = spec.training.precision.value_or(api::Precision::kFp32);
  r.train.precision = r.engine.precision;
  r.engine.threads = spec.gang.threads_per_process.value_or(0);
  r.engine.seed = r.train.seed;
  r.engine.local_rank = rank.local_rank;
  r.engine.ranks_per_worker = spec.gang.processes_per_worker.value_or(1);
  r.telemetry = telemetry_options(spec, rank);
  r.launch = rank;
  r.developer = env;
  r.tunables = env.describe();
  return r;
}

std::string describe(const AppliedOverride& o) {
  return o.variable + "=" + o.value + " overrides " + o.field + " (job: " + o.job_value + ")";
}

std::vector<std::string> describe(const RunOptions& run) {
  std::vector<std::string> out;
  out.push_back("world: " + std::to_string(run.world_size) + " rank(s)");
  if (run.world_size > 1) {
    out.push_back("all-reduce: " + std::string(api::to_string(run.comm.algorithm)) + ", compression " +
                  std::string(api::to_string(run.comm.compression)) + ", buckets " + mib(run.comm.first_bucket_bytes) +
                  " first then " + mib(run.comm.bucket_cap_bytes) + ", collective timeout " +
                  std::to_string(run.comm.timeout.count()) + " ms");
  }
  if (run.overrides.empty()) out.push_back("environment overrides: none");
  for (const AppliedOverride& o : run.overrides) out.push_back("environment override: " + describe(o));
  if (!run.tunables.empty()) {
    std::string set;
    for (const std::string& tunable : run.tunables) set += (set.empty() ? "" : ", ") + tunable;
    out.push_back("developer tunables set: " + set + " (docs/tunables.md)");
  }
  return out;
}

}  // namespace torus::worker::app

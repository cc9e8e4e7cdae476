#include "worker/app/worker_main.h"

#include <signal.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "common/api/resolve.h"
#include "common/api/validation.h"
#include "common/launch/checkpoint_layout.h"
#include "common/launch/exit_codes.h"
#include "common/launch/rank_env.h"
#include "common/log/log.h"
#include "common/process/interrupt_fd.h"
#include "common/util/error.h"
#include "common/util/tunables.h"
#include "worker/app/local_ranks.h"
#include "worker/app/run_options.h"
#include "worker/app/run_start.h"
#include "worker/app/telemetry.h"
#include "worker/backend/cpu/cpu_backend.h"

#if defined(TORUS_HAVE_CUDA)
#include "worker/backend/cuda/cuda_backend.h"
#endif

#if defined(TORUS_WITH_COMM)
#include "worker/app/comm_plan.h"
#include "worker/app/train_adapters.h"
#include "worker/comm/bucketing.h"
#include "worker/comm/traffic.h"
#include "worker/comm/world.h"
#endif

#if defined(TORUS_WITH_NCCL)
#include "worker/comm/nccl/nccl_gradient_sync.h"
#endif

namespace torus::worker::app {
namespace {

using train::EventKind;
using train::GradientSync;
using train::GradientSyncFactory;
using train::ProgressEvent;
using train::RunResult;
using train::TrainObserver;

constexpr const char* kUsage =
    "usage: torus-worker [--job FILE]  (default $TORUS_JOB_FILE; rank from RANK / WORLD_SIZE / MASTER_ADDR / ...)";

// Logs progress lines a person (and `torus run`'s log view) can follow.
class LogObserver final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind == EventKind::kEvaluation) {
      TLOG(Info) << "evaluation after epoch " << e.epoch + 1 << ": top-1 " << e.accuracy * 100 << "%, top-5 "
                 << e.top5 * 100 << "%, loss " << e.loss;
    }
    if (e.kind == EventKind::kCheckpoint) {
      TLOG(Info) << "checkpoint written: " << e.checkpoint_path;
    }
  }
};

// Forwards every event to several observers (logs, metrics and supervisor events, an injected fault).
class FanOut final : public TrainObserver {
 public:
  explicit FanOut(std::vector<TrainObserver*> observers) : observers_(std::move(observers)) {}
  void on_event(const ProgressEvent& e) override {
    for (TrainObserver* o : observers_)
      if (o != nullptr) o->on_event(e);
  }

 private:
  std::vector<TrainObserver*> observers_;
};

// Test tunables RANK:STEP: that rank of attempt 0 raises a signal at itself once it has finished that global step.
// TORUS_TEST_SIGKILL_AT_STEP: SIGKILL, so a test knows exactly which steps a failure loses.
// TORUS_TEST_SIGSTOP_AT_STEP: SIGSTOP, until the test sends SIGCONT: the rank is held at a known step and its peers
// wait for it in the next collective, alive (their metrics served), whatever the speed of the machine.
class InjectedSignal final : public TrainObserver {
 public:
  InjectedSignal(const char* tunable, int signal, const char* signal_name, int rank, int step)
      : tunable_(tunable), signal_(signal), signal_name_(signal_name), rank_(rank), step_(step) {}
  static std::unique_ptr<InjectedSignal> from_tunables(const RunOptions& run, const char* tunable, int signal,
                                                       const char* signal_name) {
    const launch::RankEnv& env = run.launch;
    const auto spec = run.developer.text(tunable);
    if (!spec || env.attempt != 0) return nullptr;
    const auto colon = spec->find(':');
    int rank = -1, step = -1;
    const char* end = spec->data() + spec->size();
    if (colon == std::string::npos ||
        std::from_chars(spec->data(), spec->data() + colon, rank).ptr != spec->data() + colon ||
        std::from_chars(spec->data() + colon + 1, end, step).ptr != end || rank < 0 || step < 1) {
      throw InvalidArgument(std::string(tunable) + ": expected RANK:STEP (a rank >= 0, a step >= 1), got '" + *spec +
                            "'");
    }
    if (rank != env.rank) return nullptr;
    return std::make_unique<InjectedSignal>(tunable, signal, signal_name, rank, step);
  }
  void on_event(const ProgressEvent& e) override {
    if (e.kind != EventKind::kStep || e.step != step_) return;
    TLOG(Warn) << tunable_ << ": rank " << rank_ << " raises " << signal_name_ << " after step " << step_;
    std::fflush(stdout);
    ::raise(signal_);
  }

 private:
  const char* tunable_;
  int signal_;
  const char* signal_name_;
  int rank_, step_;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// SIGTERM (pod deletion, preemption, Ctrl-C in `torus run`) asks the trainer to checkpoint and stop.
std::atomic<bool> g_stop_requested{false};
extern "C" void on_stop_signal(int) { g_stop_requested.store(true); }

void install_stop_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

// A pod of several processes: this torus-worker supervises the pod's local ranks (each one more torus-worker).
int run_pod_of_local_ranks(const launch::RankEnv& pod) {
  const process::InterruptFd interrupt;
  LocalRanksOptions options;
  options.worker_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  options.interrupt_fd = interrupt.fd();
  return run_local_ranks(pod, options);
}

#if defined(TORUS_WITH_COMM)
std::vector<comm::ParamSpan> param_spans(const Arena& grads) {
  std::vector<comm::ParamSpan> spans;
  for (const ArenaEntry& e : grads.entries()) spans.push_back({e.offset, e.elements});
  return spans;
}

// Gradient averaging of device memory on GPUs: NCCL on its own communicator (bootstrapped through the world's store,
// watched by the world's watchdog), while the small host collectives stay on the world communicator.
// `nccl_traffic` receives the NCCL gradient path's calls, bytes and device time (the host path's are in the world
// communicator's own stats).
GradientPath nccl_gradient_path([[maybe_unused]] comm::World& w, [[maybe_unused]] Backend& backend,
                                [[maybe_unused]] const RunOptions& run,
                                [[maybe_unused]] const std::shared_ptr<comm::TrafficCounter>& nccl_traffic) {
#if defined(TORUS_WITH_NCCL)
  auto& gpu = dynamic_cast<cuda::CudaBackend&>(backend);
  const comm::ReducerOptions reducer = reducer_options(run.comm);
  GradientPath path;
  // Off until a GPU run shows NCCL's collectives captured and replayed (docs/gpu.md): then steps of several ranks
  // replay as one graph, as one rank's do.
  const int64_t graphs = run.developer.integer("TORUS_NCCL_GRAPHS").value_or(0);
  if (graphs != 0 && graphs != 1)
    throw InvalidArgument("TORUS_NCCL_GRAPHS: expected 0 or 1, got " + std::to_string(graphs));
  const comm::GraphCapture capture = graphs == 1 ? comm::GraphCapture::kOn : comm::GraphCapture::kOff;
  path.factory = [&w, &gpu, reducer, nccl_traffic, capture](const Arena& grads) -> std::unique_ptr<GradientSync> {
    // Backends get twice the watchdog's deadline, so the watchdog reports a hung step first (with its exit code).
    auto nccl = std::make_unique<comm::NcclCommunicator>(w.rank(), w.size(), w.store(), gpu.device(), w.timeout() * 2,
                                                         "nccl/gradients/id");
    nccl->set_watchdog(w.shared_watchdog(), "nccl-gradients");
    const Tensor all = grads.all();
    auto sync = std::make_unique<comm::NcclGradientSync>(std::move(nccl), gpu.compute_stream(), all.f32(),
                                                         static_cast<size_t>(all.numel()), param_spans(grads),
                                                         reducer.buckets, nccl_traffic, capture);
    if (w.rank() == 0) {
      TLOG(Info) << "gradient all-reduce (nccl): " << comm::describe(sync->buckets(), 4);
    }
    return std::make_unique<GradientSyncOf<comm::NcclGradientSync>>(std::move(sync));
  };
  path.plan = {
      "all-reduce of the gradients: nccl (ncclAvg per bucket; spec.allReduce.algorithm and grid "
      "do not apply to GPU gradients)"};
  path.algorithm = "nccl";
  return path;
#else
  throw InvalidArgument("spec.gang.device: gpu with WORLD_SIZE=" + std::to_string(w.size()) +
                        " averages gradients with NCCL, which this torus-worker was built without (torus_comm_nccl)");
#endif
}
#endif

// Every rank that runs with a developer override says so; rank 0 logs the effective configuration in one block, as
// the components that act describe themselves.
std::vector<std::string> log_effective_configuration(const RunOptions& run, const train::Trainer& trainer,
                                                     const Backend& backend, const std::vector<std::string>& plan) {
  for (const AppliedOverride& o : run.overrides) TLOG(Warn) << "environment override: " << describe(o);
  std::vector<std::string> lines = describe(run);
  lines.insert(lines.begin() + 1, "engine: " + backend.describe());
  const std::vector<std::string> trained = trainer.describe();
  lines.insert(lines.begin() + 2, trained.begin(), trained.end());
  lines.insert(lines.end(), plan.begin(), plan.end());
  if (run.rank == 0) {
    std::string block = "effective configuration:";
    for (const std::string& line : lines) block += "\n  " + line;
    TLOG(Info) << block;
  }
  return lines;
}

}  // namespace

WorkerOptions parse_worker_args(int argc, char** argv) {
  WorkerOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--job" && i + 1 < argc) {
      o.job_file = argv[++i];
    } else if (arg.rfind("--job=", 0) == 0) {
      o.job_file = arg.substr(6);
    } else {
      throw InvalidArgument("torus-worker: unexpected argument '" + arg + "'; " + kUsage);
    }
  }
  return o;
}

std::string job_file_of(const WorkerOptions& options, const launch::RankEnv& rank_env) {
  if (!options.job_file.empty()) return options.job_file;
  if (!rank_env.job_file.empty()) return rank_env.job_file;
  throw InvalidArgument(std::string("torus-worker: no job file: give --job FILE or set TORUS_JOB_FILE; ") + kUsage);
}

std::unique_ptr<Backend> make_backend(const RunOptions& run) {
  if (run.engine.device == api::Device::kCpu)
    return cpu::make_cpu_backend(run.engine.threads > 0 ? run.engine.threads : cpu::default_threads());
#if defined(TORUS_HAVE_CUDA)
  return cuda::make_cuda_backend(cuda::cuda_options_for_rank(run.engine.local_rank, run.engine.ranks_per_worker));
#else
  throw InvalidArgument("spec.gang.device: gpu was asked for, but this torus-worker was built without CUDA");
#endif
}

BackendFactory production_backends() {
  BackendFactory f;
  f.make_backend = make_backend;
#if defined(TORUS_WITH_COMM)
  f.device_gradients = nccl_gradient_path;
#endif
  return f;
}

#if defined(TORUS_WITH_COMM)
GradientPath host_gradient_path(comm::World& w, const RunOptions& run) {
  const comm::ReducerOptions reducer = reducer_options(run.comm);
  GradientPath path;
  path.factory = [&w, reducer](const Arena& grads) -> std::unique_ptr<GradientSync> {
    auto sync = std::make_unique<CommGradientSync>(w.comm(), grads.all().span(), param_spans(grads), reducer);
    // The reducer's own buckets, in the bytes it sends (16-bit compression halves them).
    const size_t element = reducer.compression == api::Compression::kNone ? 4 : 2;
    if (w.rank() == 0) {
      TLOG(Info) << "gradient all-reduce: " << comm::describe(sync->reducer().buckets(), element);
    }
    return sync;
  };
  path.plan = describe_plan(w.comm().planner(), run.comm);
  path.algorithm = std::string(api::to_string(main_algorithm(w.comm().planner(), run.comm)));
  return path;
}
#endif

RunResult train_job(const RunOptions& run, Backend& backend, const RankWiring& wiring,
                    std::vector<std::string>* described) {
  if (wiring.collectives == nullptr) throw InvalidArgument("train_job: the rank's collectives are required");
  const train::TrainConfig& config = run.train;
  train::Trainer trainer(backend, config, train::load_datasets(config.data, config.seed), *wiring.collectives,
                         wiring.sync_factory, wiring.observer);
  const std::vector<std::string> lines = log_effective_configuration(run, trainer, backend, wiring.comm_plan);
  if (described != nullptr) *described = lines;
  StartupTimes startup{.startup_s = seconds_since(wiring.started_at), .comm_init_s = wiring.comm_init_seconds};
  const auto restore_start = std::chrono::steady_clock::now();
  const train::Resumed resumed = trainer.resume();
  startup.restore_s = seconds_since(restore_start);
  if (resumed.reason != launch::ResumeReason::kThisRun && config.checkpoint.resume_step) {
    // Every rank got rank 0's "none found": they all stop alike, and the launcher reports CheckpointLost.
    throw CheckpointLost("no checkpoint in " +
                         launch::run_checkpoint_dir(config.checkpoint.dir, config.checkpoint.run) +
                         ", but one of step " + std::to_string(*config.checkpoint.resume_step) +
                         " was written: it was deleted, or the folder is on storage this pod does not mount; "
                         "refusing to train again from step 0");
  }
  const train::LeftToTrain left = trainer.left_to_train();
  if (run.rank == 0) {
    for (const std::string& line : describe_start(config, resumed, left, trainer.last_evaluation())) TLOG(Info) << line;
  }
  if (wiring.telemetry != nullptr) {
    wiring.telemetry->run_info({std::string(api::to_string(trainer.precision().precision)),
                                dtype_name(trainer.activation_dtype()), backend.name(), wiring.algorithm});
    wiring.telemetry->started(resumed, left, startup);
  }
  trainer.set_stop_flag(&g_stop_requested);
  RunResult r = trainer.run();
  TLOG(Info) << "finished: " << r.epochs_completed << " epochs, " << r.steps << " steps, top-1 "
             << r.last_eval.top1 * 100 << "% in " << r.seconds << " s" << (r.reached_target ? " (target reached)" : "");
  return r;
}

int run_worker(const WorkerOptions& options, const BackendFactory& backends) {
  if (!backends.make_backend) throw InvalidArgument("run_worker: the backend factory is required");
  const launch::RankEnv rank_env = launch::rank_env_from_environment();
  const api::TrainingJob job = api::load_job_file(job_file_of(options, rank_env));
  if (rank_env.launch == launch::Launch::kLocalRanks) return run_pod_of_local_ranks(rank_env);
  install_stop_handler();
  const auto started_at = std::chrono::steady_clock::now();
  const RunOptions run = run_options(job.spec, rank_env, tunables::process_snapshot());
  LogObserver log_observer;
  Telemetry telemetry(run.telemetry);
  const auto injected_kill = InjectedSignal::from_tunables(run, "TORUS_TEST_SIGKILL_AT_STEP", SIGKILL, "SIGKILL");
  const auto injected_stop = InjectedSignal::from_tunables(run, "TORUS_TEST_SIGSTOP_AT_STEP", SIGSTOP, "SIGSTOP");
  FanOut observers({&log_observer, &telemetry, injected_kill.get(), injected_stop.get()});
  RunResult r;
  if (run.world_size == 1) {
    train::LocalCollectives alone;
    auto backend = backends.make_backend(run);
    r = train_job(run, *backend,
                  {.collectives = &alone, .observer = &observers, .telemetry = &telemetry, .started_at = started_at});
    telemetry.finished(r, 0, "");
  } else {
#if defined(TORUS_WITH_COMM)
    const auto comm_start = std::chrono::steady_clock::now();
    auto w = comm::make_world(run.launch, world_options(run.comm, run.developer));
    const double comm_init_seconds = seconds_since(comm_start);
    w->watchdog().set_last_words([&telemetry] { telemetry.aborted(); });
    log::set_tag("rank " + std::to_string(w->rank()));
    CommCollectives collectives(w->comm());
    auto backend = backends.make_backend(run);
    auto nccl_traffic = std::make_shared<comm::TrafficCounter>();
    if (backend->memory_space() != MemorySpace::kHost && !backends.device_gradients)
      throw InvalidArgument("run_worker: " + backend->name() + " has device memory and no gradient path for it");
    GradientPath gradients = backend->memory_space() == MemorySpace::kHost
                                 ? host_gradient_path(*w, run)
                                 : backends.device_gradients(*w, *backend, run, nccl_traffic);
    RankWiring wiring{.collectives = &collectives,
                      .sync_factory = std::move(gradients.factory),
                      .observer = &observers,
                      .telemetry = &telemetry,
                      .comm_plan = std::move(gradients.plan),
                      .algorithm = std::move(gradients.algorithm),
                      .started_at = started_at,
                      .comm_init_seconds = comm_init_seconds};
    telemetry.set_collective_sampler([&w, nccl_traffic] {
      std::vector<CollectiveSample> out;
      for (const auto& [key, s] : w->comm().stats())
        out.push_back({key.algorithm, key.level, s.calls, s.bytes, s.seconds});
      if (const comm::LevelStats nccl = nccl_traffic->totals(); nccl.calls > 0) {
        out.push_back({"nccl", comm::kWholeAllReduce, nccl.calls, nccl.bytes, nccl.seconds});
      }
      return out;
    });
    r = train_job(run, *backend, wiring);
    telemetry.finished(r, telemetry.bus_bandwidth_gbps(), telemetry.main_algorithm());
#else
    throw InvalidArgument("WORLD_SIZE=" + std::to_string(run.world_size) +
                          ": this torus-worker was built without the communication layer (worker/comm)");
#endif
  }
  if (r.stopped) {
    TLOG(Warn) << "stopped on request at step " << r.steps << " after checkpointing; exiting as retryable";
    return to_int(launch::ExitCode::kRetryable);
  }
  return 0;
}

}  // namespace torus::worker::app

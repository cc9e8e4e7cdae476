#include "worker/train/worker_main.h"

#include "common/api/validation.h"
#include "common/log/log.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/job_config.h"

#if defined(TORUS_WITH_COMM)
#include "worker/comm/bucketing.h"
#include "worker/comm/train_adapters.h"
#include "worker/comm/world.h"
#endif

namespace torus::worker::train {
namespace {

constexpr const char* kUsage = "usage: torus-worker --job FILE  (rank from RANK / WORLD_SIZE / MASTER_ADDR / ...)";

// Logs progress lines a person (and `torus run`'s log view) can follow.
class LogObserver final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind == EventKind::kEvaluation) {
      TLOG(Info) << "evaluation after epoch " << e.epoch << ": top-1 " << e.accuracy * 100 << "%, top-5 "
                 << e.top5 * 100 << "%, loss " << e.loss;
    }
    if (e.kind == EventKind::kCheckpoint) {
      TLOG(Info) << "checkpoint written: " << e.checkpoint_path;
    }
  }
};

int world_size_from_environment() { return static_cast<int>(env::get_int_or("WORLD_SIZE", 1)); }

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
  if (o.job_file.empty()) throw InvalidArgument(std::string("torus-worker: --job FILE is required; ") + kUsage);
  return o;
}

RunResult train_job(const api::TrainingJob& job, Collectives& collectives, const GradientSyncFactory& sync_factory,
                    TrainObserver* observer) {
  const api::TrainingJobSpec& spec = job.spec;
  if (spec.gang.device.value_or(api::Device::kCpu) != api::Device::kCpu)
    throw InvalidArgument("spec.gang.device: this torus-worker runs the CPU engine; device gpu needs the CUDA backend");
  TrainConfig config = to_train_config(spec, collectives.world_size());
  auto backend = cpu::make_cpu_backend(threads_for(spec));
  Trainer trainer(*backend, config, load_datasets(config.data, config.seed), collectives, sync_factory, observer);
  if (trainer.resume_latest()) {
    TLOG(Info) << "resuming at step " << trainer.step();
  }
  RunResult r = trainer.run();
  TLOG(Info) << "finished: " << r.epochs_completed << " epochs, " << r.steps << " steps, top-1 "
             << r.last_eval.top1 * 100 << "% in " << r.seconds << " s" << (r.reached_target ? " (target reached)" : "");
  return r;
}

int run_worker(const WorkerOptions& options) {
  const api::TrainingJob job = api::load_job_file(options.job_file);
  LogObserver log_observer;
  const int world = world_size_from_environment();
  if (world == 1) {
    LocalCollectives alone;
    train_job(job, alone, nullptr, &log_observer);
    return 0;
  }
#if defined(TORUS_WITH_COMM)
  auto w = comm::make_world(comm::rank_env_from_environment());
  log::set_tag("rank " + std::to_string(w->rank()));
  comm::CommCollectives collectives(w->comm());
  comm::ReducerOptions reducer;
  if (job.spec.all_reduce.bucket_size_mb)
    reducer.buckets.bucket_cap_bytes = static_cast<size_t>(*job.spec.all_reduce.bucket_size_mb * (1 << 20));
  if (job.spec.all_reduce.first_bucket_size_mb)
    reducer.buckets.first_bucket_bytes = static_cast<size_t>(*job.spec.all_reduce.first_bucket_size_mb * (1 << 20));
  auto factory = [&](const Arena& grads) -> std::unique_ptr<GradientSync> {
    std::vector<comm::ParamSpan> spans;
    for (const ArenaEntry& e : grads.entries()) spans.push_back({e.offset, e.elements});
    return std::make_unique<comm::CommGradientSync>(w->comm(), grads.all().span(), std::move(spans), reducer);
  };
  train_job(job, collectives, factory, &log_observer);
  return 0;
#else
  throw InvalidArgument("WORLD_SIZE=" + std::to_string(world) +
                        ": this torus-worker was built without the communication layer (worker/comm)");
#endif
}

}  // namespace torus::worker::train

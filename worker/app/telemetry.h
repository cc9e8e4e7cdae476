#pragma once
// What a rank tells the outside world while it trains: Prometheus metrics on its own port (WorkerMetrics, served
// by the HttpExporter), and event lines for its supervisor (`torus run`, the in-pod supervisor;
// common/process/worker_events.h). One TrainObserver feeds both, so the dashboards, the progress line and the
// job status always agree.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics/goodput_metrics.h"
#include "common/metrics/http_exporter.h"
#include "common/metrics/registry.h"
#include "common/metrics/worker_metrics.h"
#include "common/process/goodput.h"
#include "worker/train/observer.h"
#include "worker/train/trainer.h"

namespace torus::worker::app {

// Cumulative all-reduce counters of one (algorithm, level) as the comm layer keeps them; level "global" is the
// whole all-reduce, other levels its phases (e.g. "inner_reduce_scatter").
struct CollectiveSample {
  std::string algorithm;
  std::string level;
  uint64_t calls = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

struct TelemetryOptions {
  std::string job = "local";
  std::string ns = "local";
  int rank = 0;
  int world_size = 1;
  int attempt = 0;  // 0-based, as TORUS_ATTEMPT
  std::string run;  // TORUS_RUN_ID ("": none)
  int64_t epochs = 0;
  int64_t total_steps = 0;   // optimizer steps of the whole run (for progress and ETA)
  int64_t global_batch = 0;  // first phase
  int64_t per_rank_batch = 0;
  int64_t image_size = 0;
  double target_accuracy = 0;  // 0: none
  std::string metrics_host = "0.0.0.0";
  std::optional<uint16_t> metrics_port;           // nullopt: no exporter; 0: any free port
  std::chrono::milliseconds event_interval{500};  // progress event lines at most this often
};

// What the rank spent before its first step (the ledger's start-up and restore parts).
struct StartupTimes {
  double startup_s = 0;    // process start to the trainer ready (rendezvous, communicator, model, data)
  double comm_init_s = 0;  // of which the communicator's rendezvous and connections
  double restore_s = 0;    // reading the checkpoint it resumed from
};

class Telemetry final : public train::TrainObserver {
 public:
  explicit Telemetry(const TelemetryOptions& options);
  ~Telemetry() override;
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  // Emits the "started" event (rank, world, attempt, run, metrics port, where the run starts and why, what is left
  // to train, the ledger so far) and sets torus_worker_resumed_step and torus_worker_resumed_from_info.
  void started(const train::Resumed& resumed, train::LeftToTrain left, const StartupTimes& times);
  void on_event(const train::ProgressEvent& event) override;
  // Emits the "aborted" event (the last step this rank finished): its last words when a collective failed or timed
  // out and the process exits at once (comm::Watchdog::set_last_words). Safe from another thread.
  void aborted();
  // Emits the "finished" event with the run's totals.
  void finished(const train::RunResult& result, double busbw_gbps, const std::string& algorithm);

  // torus_worker_run_info{precision, activations, backend, algorithm} 1: what this rank runs, labelled by the
  // components that act (the trainer's plan and model, the backend, the communicator), set once before training.
  struct RunInfo {
    std::string precision;    // the trainer's plan: "fp16"
    std::string activations;  // the dtype the model's layers were built with: "f16"
    std::string backend;      // Backend::name(): "cuda-cudnn"
    std::string algorithm;    // all-reduce: "ring", "auto", "nccl"; "none" for one rank
  };
  void run_info(const RunInfo& info);
  const metrics::Registry& registry() const { return registry_; }

  // Where all-reduce counters come from (the comm layer); sampled at most once a second while training.
  void set_collective_sampler(std::function<std::vector<CollectiveSample>()> sampler) { sampler_ = std::move(sampler); }
  // The whole-all-reduce bus bandwidth over the run so far (nccl-tests definition), GB/s; 0 with one rank.
  double bus_bandwidth_gbps() const { return busbw_gbps_; }
  // The algorithm that carried the most bytes ("ring", "hierarchical", "torus2d").
  std::string main_algorithm() const { return main_algorithm_; }

  metrics::WorkerMetrics& metrics() { return *metrics_; }
  // Where this rank's time went so far in this attempt.
  const process::RankLedger& ledger() const { return ledger_; }
  std::optional<uint16_t> metrics_port() const;

 private:
  void on_step(const train::ProgressEvent& e);
  void on_evaluation(const train::ProgressEvent& e);
  void sample_collectives();
  void add_time(process::TimePart part, double seconds);

  TelemetryOptions options_;
  metrics::Registry registry_;
  std::unique_ptr<metrics::WorkerMetrics> metrics_;
  std::unique_ptr<metrics::GoodputMetrics> goodput_;
  std::unique_ptr<metrics::HttpExporter> exporter_;
  process::RankLedger ledger_;
  struct EpochSummary {
    int64_t epoch = 0;  // 0-based, as ProgressEvent counts
    double train_loss = 0, images_per_s = 0;
  };
  std::optional<EpochSummary> epoch_summary_;  // of the last epoch that ended, for its evaluation's event
  std::chrono::steady_clock::time_point epoch_end_{};  // evaluation runs from the epoch's end to its result
  std::chrono::steady_clock::time_point last_event_{};
  std::optional<double> last_step_elapsed_;
  int64_t last_step_ = -1;
  std::atomic<int64_t> finished_step_{0};  // read by aborted() on the watchdog's thread
  double step_seconds_ema_ = 0;
  double images_per_second_ = 0;
  std::optional<double> time_to_target_;
  double last_accuracy_ = 0;
  std::function<std::vector<CollectiveSample>()> sampler_;
  std::map<std::pair<std::string, std::string>, CollectiveSample> last_samples_;
  std::chrono::steady_clock::time_point last_sample_{};
  double busbw_gbps_ = 0;
  std::string main_algorithm_;
};

}  // namespace torus::worker::app

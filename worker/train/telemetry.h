#pragma once
// What a rank tells the outside world while it trains: Prometheus metrics on its own port (WorkerMetrics, served
// by the HttpExporter), and event lines for its supervisor (`torus run`, the in-pod supervisor;
// common/process/worker_events.h). One TrainObserver feeds both, so the dashboards, the progress line and the
// job status always agree.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/metrics/http_exporter.h"
#include "common/metrics/registry.h"
#include "common/metrics/worker_metrics.h"
#include "worker/train/observer.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {

struct TelemetryOptions {
  std::string job = "local";
  std::string ns = "local";
  int rank = 0;
  int world_size = 1;
  int attempt = 1;
  int64_t epochs = 0;
  int64_t total_steps = 0;   // optimizer steps of the whole run (for progress and ETA)
  int64_t global_batch = 0;  // first phase
  int64_t per_rank_batch = 0;
  int64_t image_size = 0;
  double target_accuracy = 0;  // 0: none
  std::string metrics_host = "0.0.0.0";
  std::optional<uint16_t> metrics_port;  // nullopt: no exporter; 0: any free port
  std::chrono::milliseconds event_interval{500};  // progress event lines at most this often
};

class Telemetry final : public TrainObserver {
 public:
  explicit Telemetry(const TelemetryOptions& options);
  ~Telemetry() override;
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  // Emits the "started" event (rank, world, attempt, metrics port, resumed step).
  void started(int64_t resumed_step);
  void on_event(const ProgressEvent& event) override;
  // Emits the "finished" event with the run's totals.
  void finished(const RunResult& result, double busbw_gbps, const std::string& algorithm);

  metrics::WorkerMetrics& metrics() { return *metrics_; }
  std::optional<uint16_t> metrics_port() const;

 private:
  void on_step(const ProgressEvent& e);
  void on_evaluation(const ProgressEvent& e);

  TelemetryOptions options_;
  metrics::Registry registry_;
  std::unique_ptr<metrics::WorkerMetrics> metrics_;
  std::unique_ptr<metrics::HttpExporter> exporter_;
  std::chrono::steady_clock::time_point last_event_{};
  std::optional<double> last_step_elapsed_;
  int64_t last_step_ = -1;
  double step_seconds_ema_ = 0;
  double images_per_second_ = 0;
  std::optional<double> time_to_target_;
  double last_accuracy_ = 0;
};

}  // namespace torus::worker::train

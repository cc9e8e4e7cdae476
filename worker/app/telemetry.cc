#include "worker/app/telemetry.h"

#include <algorithm>
#include <chrono>

#include "common/launch/checkpoint_layout.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/rates.h"
#include "common/process/worker_events.h"
#include "common/util/main_guard.h"

namespace torus::worker::app {
namespace {

using train::EventKind;
using train::ProgressEvent;
using train::RunResult;
using train::StepExecution;
using train::StepUpdate;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Telemetry::Telemetry(const TelemetryOptions& options) : options_(options) {
  metrics_ =
      std::make_unique<metrics::WorkerMetrics>(registry_, options.job, options.ns, options.rank, options.attempt);
  goodput_ =
      std::make_unique<metrics::GoodputMetrics>(registry_, options.job, options.ns, options.rank, options.attempt);
  metrics_->world_size.set(options.world_size);
  metrics_->planned_epochs.set(static_cast<double>(options.epochs));
  metrics_->planned_steps.set(static_cast<double>(options.total_steps));
  metrics_->global_batch_size.set(static_cast<double>(options.global_batch));
  metrics_->batch_size.set(static_cast<double>(options.per_rank_batch));
  metrics_->image_size.set(static_cast<double>(options.image_size));
  metrics_->target_accuracy.set(options.target_accuracy);
  metrics_->start_timestamp.set(unix_seconds());
  metrics_->update_resident_memory();
  if (options.metrics_port) {
    exporter_ = std::make_unique<metrics::HttpExporter>(
        registry_, metrics::HttpExporterOptions{options.metrics_host, *options.metrics_port});
  }
}

Telemetry::~Telemetry() = default;

std::optional<uint16_t> Telemetry::metrics_port() const {
  if (!exporter_) return std::nullopt;
  return exporter_->port();
}

void Telemetry::run_info(const RunInfo& info) {
  registry_
      .gauge(metrics::name::kWorkerRunInfo,
             "What this rank runs: the trainer's precision and activation dtype, the backend, "
             "the all-reduce algorithm (always 1).",
             {"job", "namespace", "rank", "attempt", "precision", "activations", "backend", "algorithm"})
      .labels({options_.job, options_.ns, std::to_string(options_.rank), std::to_string(options_.attempt),
               info.precision, info.activations, info.backend, info.algorithm})
      .set(1);
}

void Telemetry::add_time(process::TimePart part, double seconds) {
  ledger_[part] += seconds;
  goodput_->add(part, seconds);
}

void Telemetry::started(const train::Resumed& resumed, train::LeftToTrain left, const StartupTimes& times) {
  add_time(process::TimePart::kStartup, times.startup_s);
  add_time(process::TimePart::kRestore, times.restore_s);
  ledger_.comm_init_s = times.comm_init_s;
  goodput_->set_comm_init(times.comm_init_s);
  const std::string reason(launch::to_string(resumed.reason));
  process::StartedEvent e{.rank = options_.rank,
                          .world_size = options_.world_size,
                          .attempt = options_.attempt,
                          .run = options_.run,
                          .resumed_step = resumed.step,
                          .resumed_from = {reason, resumed.from_run, resumed.path},
                          .ledger = ledger_};
  if (left != train::LeftToTrain::kSome) e.left_to_train = std::string(train::to_string(left));
  if (auto port = metrics_port()) e.metrics_port = *port;
  if (options_.target_accuracy > 0) e.target_accuracy = options_.target_accuracy;
  finished_step_.store(resumed.step, std::memory_order_relaxed);
  metrics_->global_step.set(static_cast<double>(resumed.step));
  metrics_->resumed_step.set(static_cast<double>(resumed.step));
  // The run whose checkpoint this attempt started from, and why: the operator's status.resumedFrom.
  registry_
      .gauge(metrics::name::kWorkerResumedFromInfo,
             "Where this attempt started: the run whose checkpoint it resumed (empty: none) and why "
             "(Fresh, ThisRun, ResumeFrom) (always 1).",
             {"job", "namespace", "rank", "attempt", "run", "reason"})
      .labels({options_.job, options_.ns, std::to_string(options_.rank), std::to_string(options_.attempt),
               resumed.from_run, reason})
      .set(1);
  process::emit_event(e);
}

void Telemetry::on_event(const ProgressEvent& e) {
  switch (e.kind) {
    case EventKind::kStep:
      on_step(e);
      break;
    case EventKind::kEvaluation:
      on_evaluation(e);
      break;
    case EventKind::kCheckpoint:
      add_time(process::TimePart::kCheckpoint, e.checkpoint_seconds);
      metrics_->checkpoints.inc();
      metrics_->checkpoint_seconds.observe(e.checkpoint_seconds);
      metrics_->last_checkpoint_step.set(static_cast<double>(e.step));
      metrics_->last_checkpoint_epoch.set(static_cast<double>(e.epoch));
      metrics_->last_checkpoint_timestamp.set_to_current_time();
      process::emit_event(process::CheckpointEvent{.rank = options_.rank,
                                                   .path = e.checkpoint_path,
                                                   .step = e.step,
                                                   .epoch = static_cast<int>(e.epoch),
                                                   .seconds = e.checkpoint_seconds,
                                                   .ledger = ledger_});
      break;
    case EventKind::kEpochEnd:
      epoch_end_ = std::chrono::steady_clock::now();
      epoch_summary_ =
          EpochSummary{e.epoch, e.loss, metrics::gang_images_per_second(e.images_per_second, options_.world_size)};
      metrics_->update_resident_memory();
      break;
    case EventKind::kFinished:
      break;
  }
}

void Telemetry::sample_collectives() {
  if (!sampler_ || options_.world_size < 2) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_sample_ < std::chrono::seconds(1)) return;
  last_sample_ = now;
  uint64_t best_bytes = 0;
  double global_bytes = 0, global_seconds = 0;
  for (const CollectiveSample& s : sampler_()) {
    CollectiveSample& last = last_samples_[{s.algorithm, s.level}];
    const uint64_t calls = s.calls - last.calls;
    const double bytes = static_cast<double>(s.bytes - last.bytes);
    const double seconds = s.seconds - last.seconds;
    last = s;
    if (s.level == metrics::name::kLevelWholeAllReduce) {
      global_bytes += static_cast<double>(s.bytes);
      global_seconds += s.seconds;
      if (s.bytes > best_bytes) {
        best_bytes = s.bytes;
        main_algorithm_ = s.algorithm;
      }
    }
    if (calls == 0 || seconds <= 0) continue;
    // Per-call figures, so the histogram sees the time of one all-reduce; the bus bandwidth of a level uses the
    // world's 2(n-1)/n (the level's own participant count is the comm layer's to report).
    const double per_call_seconds = seconds / static_cast<double>(calls);
    const double per_call_bytes = bytes / static_cast<double>(calls);
    metrics::CollectiveMetrics& m = metrics_->collective(s.algorithm, s.level);
    const double bus = metrics::bus_bandwidth(bytes, seconds, options_.world_size);
    for (uint64_t i = 0; i < calls; ++i) m.observe(per_call_bytes, per_call_seconds, bus);
  }
  busbw_gbps_ = metrics::bus_bandwidth(global_bytes, global_seconds, options_.world_size) / 1e9;
}

void Telemetry::on_step(const ProgressEvent& e) {
  sample_collectives();
  // For the ETA: the time between two step events, so evaluations and checkpoints count in their share.
  if (last_step_elapsed_ && e.step > last_step_) {
    const double seconds = (e.elapsed_seconds - *last_step_elapsed_) / static_cast<double>(e.step - last_step_);
    step_seconds_ema_ = step_seconds_ema_ == 0 ? seconds : 0.9 * step_seconds_ema_ + 0.1 * seconds;
  }
  finished_step_.store(e.step, std::memory_order_relaxed);
  const double training_before = ledger_[process::TimePart::kTraining];
  ledger_.add_step(e.step_seconds, e.data_wait_seconds, e.comm_wait_seconds);
  goodput_->add(process::TimePart::kTraining, ledger_[process::TimePart::kTraining] - training_before);
  goodput_->add(process::TimePart::kDataWait, e.data_wait_seconds);
  goodput_->add(process::TimePart::kCommWait, e.comm_wait_seconds);
  // The histograms: the loop's own split of the step (data wait, compute, communication wait).
  metrics_->record_step({.step = e.step_seconds,
                         .data_wait = e.data_wait_seconds,
                         .compute = e.compute_seconds,
                         .comm_wait = e.comm_wait_seconds},
                        e.images);
  last_step_elapsed_ = e.elapsed_seconds;
  last_step_ = e.step;
  images_per_second_ = metrics::gang_images_per_second(e.images_per_second, options_.world_size);
  metrics_->images_per_second.set(e.images_per_second);
  metrics_->global_step.set(static_cast<double>(e.step));
  metrics_->epoch.set(e.fractional_epoch);
  metrics_->loss.set(e.loss);
  metrics_->learning_rate.set(e.lr);
  metrics_->loss_scale.set(e.loss_scale);
  if (e.update == StepUpdate::kSkipped) metrics_->skipped_steps.inc();
  if (e.execution == StepExecution::kReplayed) metrics_->replayed_steps.inc();

  const auto now = std::chrono::steady_clock::now();
  if (now - last_event_ < options_.event_interval) return;
  last_event_ = now;
  process::emit_event(
      process::ProgressEvent{.rank = options_.rank,
                             .epoch = static_cast<int>(e.epoch) + 1,  // the trainer counts from 0; a person from 1
                             .epochs = static_cast<int>(options_.epochs),
                             .step = e.step,
                             .steps_total = options_.total_steps,
                             .loss = e.loss,
                             .lr = e.lr,
                             .images_per_s = images_per_second_,
                             .busbw_gbps = busbw_gbps_,
                             .eta_s = metrics::eta_seconds(e.step, options_.total_steps, step_seconds_ema_),
                             .ledger = ledger_});
}

void Telemetry::on_evaluation(const ProgressEvent& e) {
  if (epoch_end_ != std::chrono::steady_clock::time_point{}) {
    add_time(process::TimePart::kEvaluation,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_end_).count());
    epoch_end_ = {};
  }
  last_accuracy_ = e.accuracy;
  metrics_->validation_accuracy.set(e.accuracy);
  process::EvaluatedEvent event{.rank = options_.rank,
                                .epoch = static_cast<int>(e.epoch) + 1,  // the epoch just evaluated, from 1
                                .accuracy = e.accuracy,
                                .top5 = e.top5,
                                .loss = e.loss,
                                .elapsed_s = e.elapsed_seconds};
  // The epoch's own figures, from the trainer (its mean step loss, the gang's rate over the whole epoch): the
  // console's epoch row is exact, not a sample of the progress events.
  if (epoch_summary_ && epoch_summary_->epoch == e.epoch) {
    event.train_loss = epoch_summary_->train_loss;
    event.images_per_s = epoch_summary_->images_per_s;
  }
  if (options_.target_accuracy > 0 && e.accuracy >= options_.target_accuracy) {
    if (!time_to_target_) time_to_target_ = e.elapsed_seconds;
    metrics_->target_accuracy_reached.set(1);
  }
  event.time_to_target_s = time_to_target_;
  process::emit_event(event);
}

void Telemetry::aborted() {
  const process::AbortedEvent event{.rank = options_.rank, .step = finished_step_.load(std::memory_order_relaxed)};
  process::emit_event(event);
  // Also under the reason in the termination log: the operator reads the step each survivor reached from the pod's
  // status, so the attempt's lost work is counted from it, not from its last progress reading.
  append_termination_log(process::format_event(event).c_str());
}

void Telemetry::finished(const RunResult& r, double busbw_gbps, const std::string& algorithm) {
  process::FinishedEvent event{.rank = options_.rank,
                               .steps = r.steps,
                               .epochs = static_cast<int>(r.epochs_completed),
                               .elapsed_s = r.seconds,
                               .images_per_s = images_per_second_,
                               .busbw_gbps = busbw_gbps,
                               .reached_target = r.reached_target};
  if (r.left_at_start != train::LeftToTrain::kSome)
    event.left_to_train = std::string(train::to_string(r.left_at_start));
  if (r.last_eval.samples > 0) event.accuracy = r.last_eval.top1;  // no evaluation ran: no accuracy to report
  if (!algorithm.empty()) event.allreduce_algorithm = algorithm;
  // What the algorithm carried over the whole run (read now: the last periodic sample may be a second old).
  uint64_t calls = 0, bytes = 0;
  if (sampler_ && !algorithm.empty()) {
    for (const CollectiveSample& s : sampler_()) {
      if (s.level != metrics::name::kLevelWholeAllReduce || s.algorithm != algorithm) continue;
      calls += s.calls;
      bytes += s.bytes;
    }
  }
  if (calls > 0) {
    event.allreduce_calls = calls;
    event.allreduce_bytes = bytes;
  }
  if (r.reached_target) event.time_to_target_s = r.seconds_to_target;
  event.ledger = ledger_;
  process::emit_event(event);
  // Rank 0's result also goes to its termination message: a job that ends before the operator's next read of its
  // /metrics still gets its final step and accuracy in status.progress (the planner reads it from the pod).
  if (options_.rank == 0) {
    process::FinishedEvent words = event;
    words.ledger = {};  // the status takes its ledger from /metrics; the message has 4 KiB
    append_termination_log(process::format_event(words).c_str());
  }
}

}  // namespace torus::worker::app

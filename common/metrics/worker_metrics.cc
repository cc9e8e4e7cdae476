#include "common/metrics/worker_metrics.h"

#include <unistd.h>

#include <fstream>

namespace torus::metrics {
namespace {

const std::vector<std::string> kBase = {"job", "namespace", "rank", "attempt"};

std::vector<std::string> base_plus(std::initializer_list<std::string> extra) {
  std::vector<std::string> names = kBase;
  names.insert(names.end(), extra);
  return names;
}

Gauge& gauge(Registry& r, const LabelValues& labels, const std::string& name, const std::string& help) {
  return r.gauge(name, help, kBase).labels(labels);
}

Counter& counter(Registry& r, const LabelValues& labels, const std::string& name, const std::string& help) {
  return r.counter(name, help, kBase).labels(labels);
}

Histogram& histogram(Registry& r, const LabelValues& labels, const std::string& name, const std::string& help,
                     std::vector<double> buckets) {
  return r.histogram(name, help, kBase, std::move(buckets)).labels(labels);
}

}  // namespace

std::vector<double> step_time_buckets() { return exponential_buckets(0.001, 2.0, 17); }

CollectiveMetrics::CollectiveMetrics(Histogram& seconds, Gauge& bus_bandwidth, Gauge& baseline, Counter& bytes,
                                     Counter& calls)
    : seconds_(seconds), bus_bandwidth_(bus_bandwidth), baseline_(baseline), bytes_(bytes), calls_(calls) {}

void CollectiveMetrics::observe(double bytes, double seconds, double bus_bytes_per_second) {
  seconds_.observe(seconds);
  bytes_.inc(bytes);
  calls_.inc();
  bus_bandwidth_.set(bus_bytes_per_second);
  // The first samples define "normal" for this run, so an alert can compare later figures with them.
  const int n = baseline_count_.fetch_add(1, std::memory_order_relaxed);
  if (n < kBaselineSamples) {
    const double sum = baseline_sum_.fetch_add(bus_bytes_per_second, std::memory_order_relaxed) + bus_bytes_per_second;
    baseline_.set(sum / (n + 1));
  }
}

WorkerMetrics::WorkerMetrics(Registry& r, const std::string& job, const std::string& ns, int rank, int attempt)
    : labels_{job, ns, std::to_string(rank), std::to_string(attempt)},
      step_seconds(histogram(r, labels_, "torus_worker_step_seconds",
                             "Wall time of one optimizer step (forward, backward, all-reduce, update).",
                             step_time_buckets())),
      compute_seconds(histogram(r, labels_, "torus_worker_compute_seconds",
                                "Time of one step's own work (forward, backward, update) without waits for data "
                                "or peers; names stragglers.",
                                step_time_buckets())),
      comm_wait_seconds(histogram(r, labels_, "torus_worker_comm_wait_seconds",
                                  "Time one step blocked on communication after its own work (gradient all-reduce "
                                  "not hidden behind backward, step agreement); high while waiting for a peer.",
                                  exponential_buckets(0.0001, 4.0, 10))),
      steps(counter(r, labels_, "torus_worker_steps_total", "Optimizer steps taken by this process.")),
      images(counter(r, labels_, "torus_worker_images_total", "Training images processed by this rank.")),
      images_per_second(
          gauge(r, labels_, "torus_worker_images_per_second", "Training throughput of this rank, recent mean.")),
      global_step(gauge(r, labels_, "torus_worker_global_step", "Global optimizer step; continues across restarts.")),
      planned_steps(gauge(r, labels_, "torus_worker_planned_steps", "Global steps the whole run will take.")),
      epoch(gauge(r, labels_, "torus_worker_epoch", "Current epoch, fractional (2.5 is half-way through the third).")),
      planned_epochs(gauge(r, labels_, "torus_worker_planned_epochs", "Epochs in the run.")),
      loss(gauge(r, labels_, "torus_worker_loss", "Training loss, recent mean.")),
      train_accuracy(gauge(r, labels_, "torus_worker_train_accuracy", "Training accuracy (0..1), recent mean.")),
      validation_accuracy(
          gauge(r, labels_, "torus_worker_validation_accuracy", "Last validation top-1 accuracy (0..1).")),
      target_accuracy(
          gauge(r, labels_, "torus_worker_target_accuracy", "The job's target validation accuracy (0..1), 0 if none.")),
      target_accuracy_reached(gauge(r, labels_, "torus_worker_target_accuracy_reached",
                                    "1 once validation accuracy reached the target, else 0.")),
      learning_rate(gauge(r, labels_, "torus_worker_learning_rate", "Current learning rate.")),
      batch_size(gauge(r, labels_, "torus_worker_batch_size", "Per-rank batch size of the current phase.")),
      global_batch_size(gauge(r, labels_, "torus_worker_global_batch_size", "Batch size summed over all ranks.")),
      image_size(gauge(r, labels_, "torus_worker_image_size_pixels",
                       "Square training image size of the current phase, in pixels.")),
      world_size(gauge(r, labels_, "torus_worker_world_size", "Ranks in the gang.")),
      data_wait_seconds(histogram(r, labels_, "torus_worker_data_wait_seconds",
                                  "Time a step waited for its input batch.", exponential_buckets(0.0001, 4.0, 10))),
      checkpoint_seconds(histogram(r, labels_, "torus_worker_checkpoint_seconds", "Time to write one checkpoint.",
                                   exponential_buckets(0.01, 2.0, 14))),
      checkpoints(counter(r, labels_, "torus_worker_checkpoints_total", "Checkpoints written by this rank.")),
      last_checkpoint_step(gauge(r, labels_, "torus_worker_last_checkpoint_step",
                                 "Global step of the last checkpoint this rank wrote (0: none yet).")),
      last_checkpoint_epoch(
          gauge(r, labels_, "torus_worker_last_checkpoint_epoch", "Epoch of the last checkpoint this rank wrote.")),
      last_checkpoint_timestamp(gauge(r, labels_, "torus_worker_last_checkpoint_timestamp_seconds",
                                      "Unix time the last checkpoint of this rank was written.")),
      resumed_step(gauge(r, labels_, "torus_worker_resumed_step",
                         "The global step this attempt resumed from (0: it started fresh; -1: not yet known).")),
      last_progress_timestamp(gauge(r, labels_, "torus_worker_last_progress_timestamp_seconds",
                                    "Unix time of the last finished step (hang detection).")),
      collective_sequence(gauge(r, labels_, "torus_worker_collective_sequence",
                                "Collectives started by this rank in this attempt; the lowest rank is the laggard.")),
      start_timestamp(
          gauge(r, labels_, "torus_worker_start_timestamp_seconds", "Unix time this worker process started.")),
      resident_memory_bytes(
          gauge(r, labels_, "torus_worker_resident_memory_bytes", "Resident memory of this worker process.")),
      device_memory_bytes(gauge(r, labels_, "torus_worker_device_memory_bytes",
                                "GPU memory held by this rank's allocator (0 on CPU).")),
      loss_scale(gauge(r, labels_, "torus_worker_loss_scale",
                       "fp16 dynamic loss scale after the last step; 0 unless the job trains in fp16.")),
      skipped_steps(counter(r, labels_, "torus_worker_skipped_steps_total",
                            "fp16 steps skipped because their gradients overflowed (inf/NaN after unscaling).")),
      replayed_steps(counter(r, labels_, "torus_worker_replayed_steps_total",
                             "Steps run as one launch of a captured step (CUDA Graph); 0 where steps run eagerly.")),
      allreduce_seconds_(r.histogram("torus_worker_allreduce_seconds", "Wall time of one all-reduce.",
                                     base_plus({"algorithm", "level"}), exponential_buckets(0.0001, 2.0, 20))),
      allreduce_bus_bandwidth_(r.gauge("torus_worker_allreduce_bus_bandwidth_bytes_per_second",
                                       "Bus bandwidth of the last all-reduce (algorithm bandwidth * 2(n-1)/n).",
                                       base_plus({"algorithm", "level"}))),
      allreduce_baseline_(r.gauge("torus_worker_allreduce_bus_bandwidth_baseline_bytes_per_second",
                                  "Mean bus bandwidth of the first all-reduces of this attempt (the start-of-run "
                                  "figure alerts compare with).",
                                  base_plus({"algorithm", "level"}))),
      allreduce_bytes_(r.counter("torus_worker_allreduce_bytes_total", "Bytes all-reduced by this rank.",
                                 base_plus({"algorithm", "level"}))),
      allreduce_calls_(r.counter("torus_worker_allreduce_calls_total", "All-reduce calls finished by this rank.",
                                 base_plus({"algorithm", "level"}))) {
  start_timestamp.set_to_current_time();
  resumed_step.set(-1);  // not known before the run has looked for its checkpoint
  // Until the first step, "no progress since" counts from start-up, so a gang stuck in rendezvous also alerts.
  last_progress_timestamp.set_to_current_time();
  update_resident_memory();
}

CollectiveMetrics& WorkerMetrics::collective(const std::string& algorithm, const std::string& level) {
  std::lock_guard lock(collectives_mutex_);
  auto key = std::make_pair(algorithm, level);
  auto it = collectives_.find(key);
  if (it == collectives_.end()) {
    LabelValues values = labels_;
    values.push_back(algorithm);
    values.push_back(level);
    auto metrics = std::make_unique<CollectiveMetrics>(
        allreduce_seconds_.labels(values), allreduce_bus_bandwidth_.labels(values), allreduce_baseline_.labels(values),
        allreduce_bytes_.labels(values), allreduce_calls_.labels(values));
    it = collectives_.emplace(std::move(key), std::move(metrics)).first;
  }
  return *it->second;
}

void WorkerMetrics::update_resident_memory() {
  // statm: total and resident sizes in pages.
  std::ifstream statm("/proc/self/statm");
  long total_pages = 0;
  long resident_pages = 0;
  if (statm >> total_pages >> resident_pages) {
    resident_memory_bytes.set(static_cast<double>(resident_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
  }
}

void WorkerMetrics::record_step(const StepTimes& t, int64_t images_in_step) {
  step_seconds.observe(t.step);
  data_wait_seconds.observe(t.data_wait);
  compute_seconds.observe(t.compute);
  comm_wait_seconds.observe(t.comm_wait);
  steps.inc();
  images.inc(static_cast<double>(images_in_step));
  last_progress_timestamp.set_to_current_time();
}

}  // namespace torus::metrics

#include "common/metrics/worker_metrics.h"

#include <unistd.h>

#include <fstream>

#include "common/metrics/metric_names.h"

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
      step_seconds(histogram(r, labels_, name::kWorkerStepSeconds,
                             "Wall time of one optimizer step (forward, backward, all-reduce, update).",
                             step_time_buckets())),
      compute_seconds(histogram(r, labels_, name::kWorkerComputeSeconds,
                                "Time of one step's own work (forward, backward, update) without waits for data "
                                "or peers; names stragglers.",
                                step_time_buckets())),
      comm_wait_seconds(histogram(r, labels_, name::kWorkerCommWaitSeconds,
                                  "Time one step blocked on communication after its own work (gradient all-reduce "
                                  "not hidden behind backward, step agreement); high while waiting for a peer.",
                                  exponential_buckets(0.0001, 4.0, 10))),
      steps(counter(r, labels_, name::kWorkerStepsTotal, "Optimizer steps taken by this process.")),
      images(counter(r, labels_, name::kWorkerImagesTotal, "Training images processed by this rank.")),
      images_per_second(
          gauge(r, labels_, name::kWorkerImagesPerSecond, "Training throughput of this rank, recent mean.")),
      global_step(gauge(r, labels_, name::kWorkerGlobalStep, "Global optimizer step; continues across restarts.")),
      planned_steps(gauge(r, labels_, name::kWorkerPlannedSteps, "Global steps the whole run will take.")),
      epoch(gauge(r, labels_, name::kWorkerEpoch, "Current epoch, fractional (2.5 is half-way through the third).")),
      planned_epochs(gauge(r, labels_, name::kWorkerPlannedEpochs, "Epochs in the run.")),
      loss(gauge(r, labels_, name::kWorkerLoss, "Training loss, recent mean.")),
      train_accuracy(gauge(r, labels_, name::kWorkerTrainAccuracy, "Training accuracy (0..1), recent mean.")),
      validation_accuracy(gauge(r, labels_, name::kWorkerValidationAccuracy, "Last validation top-1 accuracy (0..1).")),
      target_accuracy(
          gauge(r, labels_, name::kWorkerTargetAccuracy, "The job's target validation accuracy (0..1), 0 if none.")),
      target_accuracy_reached(gauge(r, labels_, name::kWorkerTargetAccuracyReached,
                                    "1 once validation accuracy reached the target, else 0.")),
      learning_rate(gauge(r, labels_, name::kWorkerLearningRate, "Current learning rate.")),
      batch_size(gauge(r, labels_, name::kWorkerBatchSize, "Per-rank batch size of the current phase.")),
      global_batch_size(gauge(r, labels_, name::kWorkerGlobalBatchSize, "Batch size summed over all ranks.")),
      image_size(gauge(r, labels_, name::kWorkerImageSizePixels,
                       "Square training image size of the current phase, in pixels.")),
      world_size(gauge(r, labels_, name::kWorkerWorldSize, "Ranks in the gang.")),
      data_wait_seconds(histogram(r, labels_, name::kWorkerDataWaitSeconds, "Time a step waited for its input batch.",
                                  exponential_buckets(0.0001, 4.0, 10))),
      checkpoint_seconds(histogram(r, labels_, name::kWorkerCheckpointSeconds, "Time to write one checkpoint.",
                                   exponential_buckets(0.01, 2.0, 14))),
      checkpoints(counter(r, labels_, name::kWorkerCheckpointsTotal, "Checkpoints written by this rank.")),
      last_checkpoint_step(gauge(r, labels_, name::kWorkerLastCheckpointStep,
                                 "Global step of the last checkpoint this rank wrote (0: none yet).")),
      last_checkpoint_epoch(
          gauge(r, labels_, name::kWorkerLastCheckpointEpoch, "Epoch of the last checkpoint this rank wrote.")),
      last_checkpoint_timestamp(gauge(r, labels_, name::kWorkerLastCheckpointTimestampSeconds,
                                      "Unix time the last checkpoint of this rank was written.")),
      resumed_step(gauge(r, labels_, name::kWorkerResumedStep,
                         "The global step this attempt resumed from (0: it started fresh; -1: not yet known).")),
      last_progress_timestamp(gauge(r, labels_, name::kWorkerLastProgressTimestampSeconds,
                                    "Unix time of the last finished step (hang detection).")),
      collective_sequence(gauge(r, labels_, name::kWorkerCollectiveSequence,
                                "Collectives started by this rank in this attempt; the lowest rank is the laggard.")),
      start_timestamp(gauge(r, labels_, name::kWorkerStartTimestampSeconds, "Unix time this worker process started.")),
      resident_memory_bytes(
          gauge(r, labels_, name::kWorkerResidentMemoryBytes, "Resident memory of this worker process.")),
      device_memory_bytes(
          gauge(r, labels_, name::kWorkerDeviceMemoryBytes, "GPU memory held by this rank's allocator (0 on CPU).")),
      loss_scale(gauge(r, labels_, name::kWorkerLossScale,
                       "fp16 dynamic loss scale after the last step; 0 unless the job trains in fp16.")),
      skipped_steps(counter(r, labels_, name::kWorkerSkippedStepsTotal,
                            "fp16 steps skipped because their gradients overflowed (inf/NaN after unscaling).")),
      replayed_steps(counter(r, labels_, name::kWorkerReplayedStepsTotal,
                             "Steps run as one launch of a captured step (CUDA Graph); 0 where steps run eagerly.")),
      allreduce_seconds_(r.histogram(name::kWorkerAllreduceSeconds, "Wall time of one all-reduce.",
                                     base_plus({"algorithm", "level"}), exponential_buckets(0.0001, 2.0, 20))),
      allreduce_bus_bandwidth_(r.gauge(name::kWorkerAllreduceBusBandwidthBytesPerSecond,
                                       "Bus bandwidth of the last all-reduce (algorithm bandwidth * 2(n-1)/n).",
                                       base_plus({"algorithm", "level"}))),
      allreduce_baseline_(r.gauge(name::kWorkerAllreduceBusBandwidthBaselineBytesPerSecond,
                                  "Mean bus bandwidth of the first all-reduces of this attempt (the start-of-run "
                                  "figure alerts compare with).",
                                  base_plus({"algorithm", "level"}))),
      allreduce_bytes_(r.counter(name::kWorkerAllreduceBytesTotal, "Bytes all-reduced by this rank.",
                                 base_plus({"algorithm", "level"}))),
      allreduce_calls_(r.counter(name::kWorkerAllreduceCallsTotal, "All-reduce calls finished by this rank.",
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

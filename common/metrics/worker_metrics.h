#pragma once
// The worker's metrics, one place for their names: every rank registers these once at start-up, the dashboards in
// dashboards/ and the alerting rules in dashboards/alerts/ query them, and docs/observability.md lists them.
// Every series carries job, namespace, rank and attempt labels; the collective ones add algorithm and level.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/metrics/registry.h"

namespace torus::metrics {

// All-reduce metrics of one (algorithm, level) pair, e.g. ("ring", "global") or ("hierarchical", "intra_node").
class CollectiveMetrics {
 public:
  CollectiveMetrics(Histogram& seconds, Gauge& bus_bandwidth, Gauge& baseline, Counter& bytes, Counter& calls);

  // One finished all-reduce of `bytes` per rank taking `seconds`; `bus_bytes_per_second` is the bus bandwidth
  // (algorithm bandwidth * 2(n-1)/n for the participants of this level; see nccl-tests PERFORMANCE.md).
  // The mean of the first kBaselineSamples bus bandwidths becomes the start-of-run baseline.
  void observe(double bytes, double seconds, double bus_bytes_per_second);

  static constexpr int kBaselineSamples = 10;

 private:
  Histogram& seconds_;
  Gauge& bus_bandwidth_;
  Gauge& baseline_;
  Counter& bytes_;
  Counter& calls_;
  std::atomic<int> baseline_count_{0};
  std::atomic<double> baseline_sum_{0.0};
};

// Where one optimizer step's time went on one rank, in seconds: data_wait + compute + comm_wait <= step (the rest
// is bookkeeping). A straggler has the largest compute; its peers show the difference as comm_wait.
struct StepTimes {
  double step = 0;       // the whole step, from asking for the batch to the end of its last collective
  double data_wait = 0;  // blocked waiting for the input batch
  double compute = 0;    // this rank's own work: forward, backward, update
  double comm_wait = 0;  // blocked on communication after its own work (all-reduce not hidden, step agreement)
};

class WorkerMetrics {
  LabelValues labels_;  // job, namespace, rank, attempt; first, since every handle below is created with it

 public:
  WorkerMetrics(Registry& registry, const std::string& job, const std::string& ns, int rank, int attempt);
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // Training progress.
  Histogram& step_seconds;  // wall time of one optimizer step (forward, backward, all-reduce, update)
  // The step's own work, without waits for data or for peers. In synchronous data-parallel training every rank's
  // step takes as long as the slowest rank's, so step time cannot name a straggler; this can.
  Histogram& compute_seconds;
  // Time the step blocked on communication after its own work: the part of the gradient all-reduce backward did not
  // hide, plus synchronous collectives of the step. High on the ranks that wait for a straggler or a slow link.
  Histogram& comm_wait_seconds;
  Counter& steps;                  // steps taken by this process
  Counter& images;                 // training images processed by this rank
  Gauge& images_per_second;        // this rank's recent throughput
  Gauge& global_step;              // global step, continues across restarts (resumed from the checkpoint)
  Gauge& planned_steps;            // global steps the whole run will take (for progress and ETA)
  Gauge& epoch;                    // current epoch (fractional: 2.5 is half-way through the third)
  Gauge& planned_epochs;           // epochs in the run
  Gauge& loss;                     // training loss, recent mean
  Gauge& train_accuracy;           // training accuracy, recent mean, 0..1
  Gauge& validation_accuracy;      // last validation (top-1) accuracy, 0..1
  Gauge& target_accuracy;          // the job's target accuracy, 0..1 (0 when none)
  Gauge& target_accuracy_reached;  // 1 once validation accuracy reached the target
  Gauge& learning_rate;            // current learning rate
  Gauge& batch_size;               // per-rank batch size of the current phase
  Gauge& global_batch_size;        // batch size summed over ranks
  Gauge& image_size;               // square training image size of the current phase, pixels
  Gauge& world_size;               // ranks in the gang
  // Where the time goes.
  Histogram& data_wait_seconds;   // time a step waited for its batch
  Histogram& checkpoint_seconds;  // time to write one checkpoint
  Counter& checkpoints;           // checkpoints written
  // What a restart resumes from (the operator's status.lastCheckpoint and status.resumedFrom read these).
  Gauge& last_checkpoint_step;       // global step of the last checkpoint this rank wrote (0: none yet)
  Gauge& last_checkpoint_epoch;      // its epoch
  Gauge& last_checkpoint_timestamp;  // Unix seconds it was written
  Gauge& resumed_step;  // the global step this attempt resumed from (0: started fresh; -1 before it looked)
  // Hang detection: a rank whose timestamp stops moving is stuck; the lowest sequence number names the laggard.
  Gauge& last_progress_timestamp;  // Unix seconds of the last finished step
  Gauge& collective_sequence;      // collectives started by this rank in this attempt
  Gauge& start_timestamp;          // Unix seconds this process started
  // Memory.
  Gauge& resident_memory_bytes;  // process RSS (update_resident_memory())
  Gauge& device_memory_bytes;    // GPU memory held by this rank's allocator (0 on CPU)
  // Mixed precision (training.precision fp16: dynamic loss scaling).
  Gauge& loss_scale;        // the loss scale after the last step; 0 unless the job trains in fp16
  Counter& skipped_steps;  // fp16 steps whose gradients overflowed, so the optimizer skipped them (this process)
  // Device path (worker/train/device_plan.h).
  Counter& replayed_steps;  // steps run as a replay of a captured step (CUDA Graph)

  // The metrics of one (algorithm, level), registered on first use; keep the reference (the lookup locks).
  CollectiveMetrics& collective(const std::string& algorithm, const std::string& level);
  // Reads this process's RSS from /proc/self/statm into resident_memory_bytes.
  void update_resident_memory();
  // Call after each optimizer step: observes the step, data wait, compute and communication wait times, counts
  // images, stamps last progress.
  void record_step(const StepTimes& times, int64_t images_in_step);

 private:
  Family<Histogram>& allreduce_seconds_;
  Family<Gauge>& allreduce_bus_bandwidth_;
  Family<Gauge>& allreduce_baseline_;
  Family<Counter>& allreduce_bytes_;
  Family<Counter>& allreduce_calls_;
  std::mutex collectives_mutex_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<CollectiveMetrics>> collectives_;
};

// Buckets shared with the dashboards' heatmaps: 1 ms to ~65 s, doubling.
std::vector<double> step_time_buckets();

}  // namespace torus::metrics

#pragma once
// Gradient averaging for GPU ranks over NCCL, without a host synchronization in the step. Its begin_step / grad_ready /
// finish_step are the training loop's GradientSync calls (worker/app/train_adapters.h plugs it in: the comm layer
// does not include the training loop).
// The device gradient arena is bucketed exactly like the CPU reducer (BucketSchedule, bucketing.h). As backward
// announces gradients, each complete bucket's ncclAllReduce(ncclAvg) is enqueued, in bucket order, on the
// communicator's stream after the work queued on the compute stream so far (an event); finish_step() enqueues the
// rest and makes the compute stream wait for the communicator's stream (an event): the SGD update queued next sees
// the averages, and the host never waits for the device.
//
// Failures and hangs. Each step also queues a watch on the communicator's thread that waits, with the collective
// timeout, for the step's reductions to finish on the device and checks NCCL's asynchronous errors. With the world's
// watchdog set on the communicator, a hung step is reported and exits with the collective-timeout code, a failed one
// (a peer gone) with the retryable code; without one, the error is rethrown at the next step. At most
// kStepsInFlight steps are watched at once: beyond that the host waits for the oldest (the device is that far
// behind), which bounds how far the host runs ahead.
//
// Captured steps (GraphCapture::kOn). When the compute stream is being captured (a CUDA Graph of the whole step), the
// same calls record the step's reductions into the graph: the communicator's stream waits for an event of the
// capturing stream, so it joins the capture (a forked stream), and finish_step's event joins it back; no watch is
// queued then (the communication thread must not touch a capturing stream) and no bucket is timed (events inside a
// graph are re-recorded by every replay, so a watch could not read one replay's times). After each replay,
// replayed() queues the step's watch on an event recorded after the replay: a hung or failed replayed step is
// reported like an eager one. The nccl metrics then count the eager steps (each epoch's first), not the replays.
//
// Metrics. CUDA events bracket each bucket's reduction on the device from when every rank had arrived at it (an
// arrival gate, a one-element all-reduce, goes first: bucket_placement.h says why), so the time is the transfer's,
// without this rank's backward or the wait for the slowest peer; once a step's watch has seen the events finish, it
// adds the step's calls, bytes and summed device time to a TrafficCounter, which the worker's metrics sampler reads
// as algorithm "nccl", level "global" (the all-reduce panels of the dashboards, whose bus bandwidth is then the
// transfer's, comparable with nccl-tests).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "worker/comm/bucketing.h"
#include "worker/comm/nccl/nccl_communicator.h"
#include "worker/comm/traffic.h"

namespace torus::comm {

// Whether a step's reductions may be recorded into a CUDA Graph of the step (captured and replayed by the trainer).
enum class GraphCapture : uint8_t { kOff, kOn };

class NcclGradientSync final {
 public:
  static constexpr size_t kStepsInFlight = 2;

  // `arena` (device memory on the communicator's device, `arena_elements` fp32 values) holds every gradient, written
  // by kernels on `compute`; `params` are its parameters' spans (ascending). The sync owns the communicator.
  // `traffic` (may be null) receives each finished step's calls, bytes and device seconds. Give it on every rank or
  // on none: timing adds the arrival gate, a collective, to each bucket.
  NcclGradientSync(std::unique_ptr<NcclCommunicator> comm, cudaStream_t compute, float* arena, size_t arena_elements,
                   std::vector<ParamSpan> params, const BucketOptions& buckets,
                   std::shared_ptr<TrafficCounter> traffic = nullptr, GraphCapture capture = GraphCapture::kOff);
  ~NcclGradientSync();
  NcclGradientSync(const NcclGradientSync&) = delete;
  NcclGradientSync& operator=(const NcclGradientSync&) = delete;

  // Before the forward pass of a step.
  void begin_step();
  // Parameter `param_index`'s gradient is final (backward order): enqueues the buckets it completes.
  void grad_ready(size_t param_index);
  // Enqueues the rest; the compute stream waits for the averages (no host wait).
  void finish_step();
  // Whether the trainer may capture steps that call this sync (GraphCapture::kOn).
  bool capturable() const { return capture_ == GraphCapture::kOn; }
  // After each replay of a captured step, on the training thread: queues the replay's watch.
  void replayed();

  const std::vector<Bucket>& buckets() const { return schedule_.buckets(); }
  NcclCommunicator& communicator() { return *comm_; }
  // Blocks until every enqueued reduction finished (tests, shutdown); rethrows a failure.
  void drain();

 private:
  void launch(BucketSchedule::Range buckets);
  // Whether the compute stream is being captured now (the step's calls are recording a graph).
  bool capturing() const;
  void create_timing_events();
  // Drops finished watches, rethrowing the first failure; waits for the oldest while more than `keep` remain.
  void reap(size_t keep);

  std::unique_ptr<NcclCommunicator> comm_;
  cudaStream_t compute_;
  float* arena_;
  BucketSchedule schedule_;
  size_t step_bytes_ = 0;
  std::deque<Work> watches_;  // one per step, oldest first
  std::shared_ptr<TrafficCounter> traffic_;
  // Per step slot (kStepsInFlight + 1: a slot is reused only after its step's watch ended), per bucket.
  std::vector<std::vector<NcclCommunicator::Timing>> timing_;
  std::vector<worker::cuda::Event> timing_events_;  // the owners of every event in timing_
  size_t slot_ = 0;
  GraphCapture capture_;
  // Recorded after each replay, one per watch that may be in flight (kStepsInFlight + 1, used in turn).
  std::vector<worker::cuda::Event> replay_events_;
  size_t replay_slot_ = 0;
};

}  // namespace torus::comm

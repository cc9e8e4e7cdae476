#pragma once
// The GPU backend: NCCL. Buffers are device pointers; collectives run on the communicator's own CUDA stream (the
// communication stream, so they overlap with compute on other streams). The communicator is created non-blocking
// (ncclCommInitRankConfig with blocking = 0) so every wait has a deadline; on a timeout or an asynchronous NCCL error
// the communicator is aborted (ncclCommAbort) and the call throws (Timeout, or CudaError naming NCCL's error).
// Rank 0's ncclUniqueId travels through the store.
//
// Ordering against compute. Collectives run on the communication thread, later than the host enqueued the kernels
// that produce their buffers: order_after(compute_stream) makes each collective's stream wait for everything queued
// on the compute stream when the collective starts (an event, no host wait). The other direction needs nothing: a
// collective returns (its Work completes) only after its stream has finished, so work queued after Work::wait()
// sees the result.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "worker/backend/cuda/handles.h"
#include "worker/comm/communicator.h"
#include "worker/comm/nccl/bucket_placement.h"
#include "worker/comm/store.h"

namespace torus::comm {

class NcclCommunicator : public Communicator {
 public:
  // `device` is the CUDA device of this rank (usually LOCAL_RANK). `id_key` names the store key of the unique id:
  // distinct per communicator created from the same store in the same attempt.
  NcclCommunicator(int rank, int size, std::shared_ptr<Store> store, int device, milliseconds timeout,
                   const std::string& id_key = "nccl/id");
  ~NcclCommunicator() override;

  void all_reduce_now(BufferView buf, ReduceOp op) override;
  // In place with NCCL's own kernels when count divides evenly; otherwise an all-reduce (a superset of the
  // result) or per-chunk broadcasts keep the uneven chunk_range layout.
  void reduce_scatter_now(BufferView buf, ReduceOp op) override;
  void all_gather_now(BufferView buf) override;
  void broadcast_now(BufferView buf, int root) override;
  void barrier_now() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "nccl"; }
  void abort() noexcept override;

  cudaStream_t stream() const { return stream_.get(); }
  // Every later collective waits (on the device) for the work queued on `producer` when it starts; nullptr: none.
  // Do not capture `producer` into a CUDA Graph while collectives may start (the event record would join it).
  void order_after(cudaStream_t producer) { producer_.store(producer); }

  // --- the gradient path: enqueued from the calling thread, without the communication thread or a host wait ---
  // Events recorded on stream() around one enqueued collective (created with timing), for its device time: from
  // when every rank had arrived at it to its end (bucket_placement.h says why and how).
  struct Timing {
    cudaEvent_t started = nullptr;
    cudaEvent_t finished = nullptr;
  };
  // Enqueues an in-place average of `buf` (ncclAvg) on stream(), after everything queued on `after` so far (an
  // event); with `timing`, an arrival gate (a one-element all-reduce) goes first and its events bracket the
  // reduction from when every rank had arrived, so neither the wait for `after` nor the wait for the slowest peer
  // counts (bucket_placements()). Every rank must pass `timing` alike: the gate is a collective. Returns once NCCL
  // accepted the calls. Only one thread may use these (the training loop's).
  void enqueue_all_reduce_average(BufferView buf, cudaStream_t after, const Timing* timing = nullptr);
  // Makes `consumer` wait (on the device, an event) for everything enqueued on stream() so far.
  void order_before(cudaStream_t consumer);
  // Waits on the host for everything enqueued on stream() so far, checking NCCL's asynchronous errors; aborts the
  // communicator and throws on an error or at the deadline. Run it on the communication thread (submit()) to watch
  // enqueued collectives: with a watchdog set, a hung or failed step is reported like any collective. It binds the
  // rank's device on the calling thread first, so CUDA calls after it on that thread (the step's event timings) use
  // this rank's device, not device 0. An enqueue in progress on the training thread finishes first.
  void wait_enqueued(const char* what) { complete(what); }
  // The same watch for work that ran outside stream(): waits on the host for `event` (recorded after it, e.g. after
  // a replayed CUDA Graph whose reductions ran on streams forked inside the capture), checking NCCL's asynchronous
  // errors; aborts and throws on an error or at the deadline. Binds the rank's device first.
  void wait_event(cudaEvent_t event, const char* what);

 private:
  NcclCommunicator(int rank, int size, ncclComm_t comm, int device, milliseconds timeout);
  void create_stream_and_events();
  // Waits for the stream before the owners below free its memory and events (teardown, a failed constructor).
  void drain_stream() noexcept;
  // Makes this rank's device current on the calling thread (the communication thread starts on device 0).
  void bind_device();
  // Throws when abort() ran; call with nccl_mu_ held, before any NCCL call on comm_.
  void check_not_aborted(const char* what) const;
  // The communicator's state: ncclSuccess, ncclInProgress, or an error (after which it is aborted and this throws).
  ncclResult_t poll(const char* what);
  // Waits for the communicator's non-blocking init/split/enqueue to settle (ncclInProgress -> ncclSuccess).
  void settle(const char* what);
  // Before a collective: the communication stream waits for the producer stream (order_after).
  void wait_for_producer();
  // One step of enqueue_all_reduce_average (stream_mu_ held).
  void place(Placement step, BufferView buf, cudaStream_t after, const Timing* timing);
  // Binds the device, then waits for everything queued on the stream, checking NCCL's asynchronous errors; aborts on
  // the deadline.
  void complete(const char* what);

  int device_;
  ncclComm_t comm_ = nullptr;
  // Destroyed in reverse order: the barrier word, the events, then the stream (after drain_stream()).
  worker::cuda::Stream stream_;
  worker::cuda::Event done_;
  worker::cuda::Event produced_;
  worker::cuda::Event enqueue_after_;  // the gradient path's events (its own thread: not shared with the above)
  worker::cuda::Event enqueued_done_;
  worker::cuda::DeviceMemory barrier_word_;  // one float, for barrier_now()
  worker::cuda::DeviceMemory gate_word_;     // one float, zero, for the gradient path's arrival gates
  std::atomic<cudaStream_t> producer_{nullptr};
  // Held while work is placed on stream_ (event records, an NCCL enqueue until it settled): the communication
  // thread's complete() records done_ between two enqueues of the training thread, never during one
  // (ncclInProgress). Lock order: stream_mu_, then nccl_mu_.
  std::mutex stream_mu_;
  // Serializes NCCL calls on comm_ with abort() (the watchdog calls it from its own thread).
  mutable std::mutex nccl_mu_;
  bool aborted_ = false;
};

}  // namespace torus::comm

#include "worker/comm/nccl/nccl_communicator.h"

#include <cstring>
#include <thread>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/backend/cuda/errors.h"

namespace torus::comm {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
  }
  throw InvalidArgument(std::string("nccl: unsupported data type ") + dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

bool failed(ncclResult_t state) { return state != ncclSuccess && state != ncclInProgress; }

// CUDA and NCCL offer no blocking wait with a deadline: poll, yielding the core between checks.
void pause_briefly() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int size, std::shared_ptr<Store> store, int device, milliseconds timeout,
                                   const std::string& id_key)
    : Communicator(rank, size, timeout), device_(device) {
  try {
    bind_device();
    create_stream_and_events();
    ncclUniqueId id;
    if (rank == 0) {
      NCCL_CHECK(ncclGetUniqueId(&id));
      store->set(id_key, Bytes(reinterpret_cast<char*>(&id), reinterpret_cast<char*>(&id) + sizeof(id)));
    } else {
      Bytes b = store->get(id_key, timeout);
      if (b.size() != sizeof(id))
        throw CorruptData("store key " + id_key + ": an NCCL unique id has " + std::to_string(sizeof(id)) +
                          " bytes, got " + std::to_string(b.size()));
      std::memcpy(&id, b.data(), sizeof(id));
    }
    ncclConfig_t config = nonblocking_config();
    {
      std::lock_guard lock(nccl_mu_);
      NCCL_CHECK(ncclCommInitRankConfig(&comm_, size, id, rank, &config));
    }
    settle("ncclCommInitRankConfig");
  } catch (...) {
    stop_thread();
    abort();
    drain_stream();
    throw;
  }
}

NcclCommunicator::NcclCommunicator(int rank, int size, ncclComm_t comm, int device, milliseconds timeout)
    : Communicator(rank, size, timeout), device_(device), comm_(comm) {
  try {
    bind_device();
    create_stream_and_events();
  } catch (...) {
    stop_thread();
    abort();
    drain_stream();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  stop_thread();
  (void)cudaSetDevice(device_);
  {
    std::lock_guard lock(nccl_mu_);
    if (comm_ != nullptr && !aborted_) {
      // Flush, then destroy; a finalize that fails or does not settle in time (a peer gone) turns into an abort.
      bool settled = false;
      if (!failed(ncclCommFinalize(comm_))) {
        for (const auto deadline = Clock::now() + timeout(); Clock::now() < deadline; pause_briefly()) {
          ncclResult_t state = ncclInProgress;
          if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || failed(state)) break;
          if (state == ncclSuccess) {
            settled = true;
            break;
          }
        }
      }
      if (settled) {
        (void)ncclCommDestroy(comm_);
      } else {
        (void)ncclCommAbort(comm_);
      }
      aborted_ = true;  // gone either way: a late abort() is a no-op
    }
  }
  drain_stream();
}

void NcclCommunicator::create_stream_and_events() {
  // The highest priority, like the compute stream: a reduction's kernels are scheduled as blocks free up instead of
  // queueing behind the backward's pending blocks (the next step's forward waits for the reduction).
  stream_ = worker::cuda::make_stream(worker::cuda::StreamPriority::kNormal);
  done_ = worker::cuda::make_event();
  produced_ = worker::cuda::make_event();
  enqueue_after_ = worker::cuda::make_event();
  enqueued_done_ = worker::cuda::make_event();
  barrier_word_ = worker::cuda::DeviceMemory(sizeof(float));
  gate_word_ = worker::cuda::DeviceMemory(sizeof(float));
  // Zero, on the stream the gates run on: a sum of zeros stays zero (never an Inf or NaN from what the allocation
  // held); only a gate's completion matters.
  CUDA_CHECK(cudaMemsetAsync(gate_word_.get(), 0, sizeof(float), stream_.get()));
}

void NcclCommunicator::drain_stream() noexcept {
  if (stream_) (void)cudaStreamSynchronize(stream_.get());
}

void NcclCommunicator::abort() noexcept {
  std::lock_guard lock(nccl_mu_);
  if (comm_ != nullptr && !aborted_) {
    aborted_ = true;
    (void)ncclCommAbort(comm_);
  }
}

void NcclCommunicator::bind_device() { CUDA_CHECK(cudaSetDevice(device_)); }

void NcclCommunicator::check_not_aborted(const char* what) const {
  if (aborted_)
    throw Error(std::string("NCCL ") + what + ": the communicator was aborted (rank " + std::to_string(rank()) +
                " of " + std::to_string(size()) + ")");
}

ncclResult_t NcclCommunicator::poll(const char* what) {
  ncclResult_t state = ncclSuccess;
  std::string detail;
  {
    std::lock_guard lock(nccl_mu_);
    check_not_aborted(what);
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (!failed(state)) return state;
    detail = ncclGetLastError(comm_);
  }
  // NCCL's contract: after an asynchronous error nothing can be assumed about queued work; abort the communicator.
  abort();
  throw ::torus::worker::cuda::CudaError(std::string("NCCL error: ") + what + " failed on rank " +
                                         std::to_string(rank()) + " of " + std::to_string(size()) + ": " +
                                         ncclGetErrorString(state) + (detail.empty() ? "" : " (" + detail + ")") +
                                         "; communicator aborted");
}

void NcclCommunicator::settle(const char* what) {
  const auto deadline = Clock::now() + timeout();
  while (poll(what) != ncclSuccess) {
    if (Clock::now() > deadline) {
      abort();
      throw Timeout(std::string("NCCL ") + what + " did not finish within " + std::to_string(timeout().count()) +
                    " ms (rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                    "); communicator aborted");
    }
    pause_briefly();
  }
}

void NcclCommunicator::wait_for_producer() {
  cudaStream_t producer = producer_.load();
  if (producer == nullptr) return;
  CUDA_CHECK(cudaEventRecord(produced_.get(), producer));
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), produced_.get(), 0));
}

void NcclCommunicator::complete(const char* what) {
  bind_device();  // on the communication thread, whose current device is 0 until bound
  {
    // Not while the training thread is mid-enqueue: done_ then follows every enqueue that returned.
    std::lock_guard placing(stream_mu_);
    settle(what);
    CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
  }
  wait_event(done_.get(), what);
}

void NcclCommunicator::wait_event(cudaEvent_t event, const char* what) {
  bind_device();
  const auto deadline = Clock::now() + timeout();
  for (;;) {
    const cudaError_t q = cudaEventQuery(event);
    if (q != cudaSuccess && q != cudaErrorNotReady) CUDA_CHECK(q);
    (void)poll(what);  // throws on an asynchronous error (a peer gone, a network failure)
    if (q == cudaSuccess) return;
    if (Clock::now() > deadline) {
      abort();
      throw Timeout(std::string("NCCL ") + what + " did not finish within " + std::to_string(timeout().count()) +
                    " ms (rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                    "); communicator aborted");
    }
    pause_briefly();
  }
}

// Enqueues one NCCL call (or group) under the lock abort() takes, so an abort never frees comm_ mid-call.
#define TORUS_NCCL_ENQUEUE(what, expr)                               \
  do {                                                               \
    std::lock_guard lock(nccl_mu_);                                  \
    check_not_aborted(what);                                         \
    ::torus::worker::cuda::check((expr), #expr, __FILE__, __LINE__); \
  } while (false)

void NcclCommunicator::all_reduce_now(BufferView buf, ReduceOp op) {
  if (buf.count == 0) return;
  bind_device();
  {
    std::lock_guard placing(stream_mu_);
    wait_for_producer();
    TORUS_NCCL_ENQUEUE("all_reduce", ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), nccl_op(op),
                                                   comm_, stream_.get()));
  }
  complete("all_reduce");
}

void NcclCommunicator::reduce_scatter_now(BufferView buf, ReduceOp op) {
  if (buf.count == 0) return;
  const size_t n = static_cast<size_t>(size());
  if (buf.count % n != 0) return all_reduce_now(buf, op);
  bind_device();
  {
    std::lock_guard placing(stream_mu_);
    wait_for_producer();
    const size_t per = buf.count / n;
    // In place: NCCL's recvbuff == sendbuff + rank * recvcount.
    TORUS_NCCL_ENQUEUE("reduce_scatter", ncclReduceScatter(buf.data, buf.at(per * static_cast<size_t>(rank())), per,
                                                           nccl_type(buf.dtype), nccl_op(op), comm_, stream_.get()));
  }
  complete("reduce_scatter");
}

void NcclCommunicator::all_gather_now(BufferView buf) {
  if (buf.count == 0) return;
  bind_device();
  std::unique_lock placing(stream_mu_);
  wait_for_producer();
  const size_t n = static_cast<size_t>(size());
  if (buf.count % n == 0) {
    // In place: NCCL's sendbuff == recvbuff + rank * sendcount.
    const size_t per = buf.count / n;
    TORUS_NCCL_ENQUEUE("all_gather", ncclAllGather(buf.at(per * static_cast<size_t>(rank())), buf.data, per,
                                                   nccl_type(buf.dtype), comm_, stream_.get()));
  } else {
    std::lock_guard lock(nccl_mu_);
    check_not_aborted("all_gather");
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      const Range c = chunk_range(buf.count, size(), r);
      if (c.size() > 0)
        NCCL_CHECK(
            ncclBroadcast(buf.at(c.begin), buf.at(c.begin), c.size(), nccl_type(buf.dtype), r, comm_, stream_.get()));
    }
    NCCL_CHECK(ncclGroupEnd());
  }
  placing.unlock();
  complete("all_gather");
}

void NcclCommunicator::broadcast_now(BufferView buf, int root) {
  if (buf.count == 0) return;
  bind_device();
  {
    std::lock_guard placing(stream_mu_);
    wait_for_producer();
    TORUS_NCCL_ENQUEUE("broadcast",
                       ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, comm_, stream_.get()));
  }
  complete("broadcast");
}

void NcclCommunicator::barrier_now() {
  // NCCL has no barrier: a one-element all-reduce orders every rank the same way.
  bind_device();
  {
    std::lock_guard placing(stream_mu_);
    CUDA_CHECK(cudaMemsetAsync(barrier_word_.get(), 0, sizeof(float), stream_.get()));
    TORUS_NCCL_ENQUEUE("barrier", ncclAllReduce(barrier_word_.get(), barrier_word_.get(), 1, ncclFloat32, ncclSum,
                                                comm_, stream_.get()));
  }
  complete("barrier");
}

void NcclCommunicator::enqueue_all_reduce_average(BufferView buf, cudaStream_t after, const Timing* timing) {
  if (buf.count == 0) return;
  bind_device();
  // Until NCCL settled: the communication thread's complete() must not record its event mid-enqueue.
  std::lock_guard placing(stream_mu_);
  const auto steps = bucket_placements(after != nullptr ? ProducerWait::kWait : ProducerWait::kNone,
                                       timing != nullptr ? BucketTiming::kFromArrival : BucketTiming::kOff);
  for (const Placement step : steps) place(step, buf, after, timing);
}

void NcclCommunicator::place(Placement step, BufferView buf, cudaStream_t after, const Timing* timing) {
  // Non-blocking communicators may still be enqueueing (ncclInProgress): each NCCL call settles before the next
  // placement, so an event recorded after it follows its kernel. settle() polls NCCL's host-side state only.
  switch (step) {
    case Placement::kWaitForProducer:
      CUDA_CHECK(cudaEventRecord(enqueue_after_.get(), after));
      CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), enqueue_after_.get(), 0));
      return;
    case Placement::kArrivalGate:
      TORUS_NCCL_ENQUEUE("arrival gate", ncclAllReduce(gate_word_.get(), gate_word_.get(), 1, ncclFloat32, ncclSum,
                                                       comm_, stream_.get()));
      settle("arrival gate");
      return;
    case Placement::kStartEvent:
      CUDA_CHECK(cudaEventRecord(timing->started, stream_.get()));
      return;
    case Placement::kReduction:
      TORUS_NCCL_ENQUEUE("all_reduce_average", ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype),
                                                             ncclAvg, comm_, stream_.get()));
      settle("all_reduce_average");
      return;
    case Placement::kFinishEvent:
      CUDA_CHECK(cudaEventRecord(timing->finished, stream_.get()));
      return;
  }
}

void NcclCommunicator::order_before(cudaStream_t consumer) {
  bind_device();
  std::lock_guard placing(stream_mu_);
  CUDA_CHECK(cudaEventRecord(enqueued_done_.get(), stream_.get()));
  CUDA_CHECK(cudaStreamWaitEvent(consumer, enqueued_done_.get(), 0));
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  bind_device();
  ncclConfig_t config = nonblocking_config();
  ncclComm_t sub = nullptr;
  TORUS_NCCL_ENQUEUE("split", ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, &config));
  settle("ncclCommSplit");
  if (color < 0 || sub == nullptr) return nullptr;
  // A fresh non-blocking communicator may still be initialising: wait before asking for its shape.
  for (const auto deadline = Clock::now() + timeout();;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(sub, &state);
    if (asked == ncclSuccess && state == ncclSuccess) break;
    if (asked != ncclSuccess || failed(state)) {
      (void)ncclCommAbort(sub);
      throw ::torus::worker::cuda::CudaError(std::string("NCCL error: ncclCommSplit: the new communicator failed: ") +
                                             ncclGetErrorString(asked != ncclSuccess ? asked : state));
    }
    if (Clock::now() > deadline) {
      (void)ncclCommAbort(sub);
      throw Timeout("ncclCommSplit: the new communicator did not come up within " + std::to_string(timeout().count()) +
                    " ms");
    }
    pause_briefly();
  }
  int sub_rank = 0;
  int sub_size = 0;
  if (ncclCommUserRank(sub, &sub_rank) != ncclSuccess || ncclCommCount(sub, &sub_size) != ncclSuccess) {
    (void)ncclCommAbort(sub);
    throw ::torus::worker::cuda::CudaError(
        "NCCL error: ncclCommSplit: cannot read the new communicator's rank and size");
  }
  // The private constructor aborts `sub` itself if it fails.
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub_rank, sub_size, sub, device_, timeout()));
}

#undef TORUS_NCCL_ENQUEUE

}  // namespace torus::comm

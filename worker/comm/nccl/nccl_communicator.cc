#include "worker/comm/nccl/nccl_communicator.h"

#include <cstring>
#include <thread>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/backend/cuda/errors.h"

namespace torus::comm {

namespace {

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// CUDA and NCCL offer no blocking wait with a deadline: poll, yielding the core between checks.
void pause_briefly() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int size, std::shared_ptr<Store> store, int device, milliseconds timeout)
    : Communicator(rank, size, timeout), device_(device) {
  CUDA_CHECK(cudaSetDevice(device_));
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    store->set("nccl/id", Bytes(reinterpret_cast<char*>(&id), reinterpret_cast<char*>(&id) + sizeof(id)));
  } else {
    Bytes b = store->get("nccl/id", timeout);
    if (b.size() != sizeof(id)) throw CorruptData("nccl/id in the store has the wrong size");
    std::memcpy(&id, b.data(), sizeof(id));
  }
  ncclConfig_t config = nonblocking_config();
  NCCL_CHECK(ncclCommInitRankConfig(&comm_, size, id, rank, &config));
  settle("ncclCommInitRankConfig");
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

NcclCommunicator::NcclCommunicator(int rank, int size, ncclComm_t comm, int device, milliseconds timeout)
    : Communicator(rank, size, timeout), device_(device), comm_(comm) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
  stop_thread();
  if (comm_ != nullptr && !aborted_) {
    // Flush, then destroy; a finalize that does not settle in time (a peer gone) turns into an abort instead.
    bool settled = ncclCommFinalize(comm_) == ncclSuccess;
    for (const auto deadline = Clock::now() + timeout(); !settled && Clock::now() < deadline; pause_briefly()) {
      ncclResult_t state = ncclInProgress;
      settled = ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclSuccess;
    }
    if (settled) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCommunicator::abort() noexcept {
  if (comm_ != nullptr && !aborted_) {
    aborted_ = true;
    ncclCommAbort(comm_);
  }
}

void NcclCommunicator::settle(const char* what) {
  const auto deadline = Clock::now() + timeout();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) NCCL_CHECK(state);
    if (Clock::now() > deadline) {
      abort();
      throw Timeout(std::string("NCCL ") + what + " did not finish within " + std::to_string(timeout().count()) +
                    " ms; communicator aborted");
    }
    pause_briefly();
  }
}

void NcclCommunicator::complete(const char* what) {
  settle(what);
  CUDA_CHECK(cudaEventRecord(done_, stream_));
  const auto deadline = Clock::now() + timeout();
  for (;;) {
    cudaError_t q = cudaEventQuery(done_);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) CUDA_CHECK(q);
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (Clock::now() > deadline) {
      abort();
      throw Timeout(std::string("NCCL ") + what + " did not finish within " + std::to_string(timeout().count()) +
                    " ms (rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                    "); communicator aborted");
    }
    pause_briefly();
  }
}

void NcclCommunicator::all_reduce_now(Buffer buf, ReduceOp op) {
  if (buf.count == 0) return;
  NCCL_CHECK(ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), nccl_op(op), comm_, stream_));
  complete("all_reduce");
}

void NcclCommunicator::reduce_scatter_now(Buffer buf, ReduceOp op) {
  if (buf.count == 0) return;
  const size_t n = static_cast<size_t>(size());
  if (buf.count % n != 0) return all_reduce_now(buf, op);
  const size_t per = buf.count / n;
  NCCL_CHECK(ncclReduceScatter(buf.data, buf.at(per * static_cast<size_t>(rank())), per, nccl_type(buf.dtype),
                               nccl_op(op), comm_, stream_));
  complete("reduce_scatter");
}

void NcclCommunicator::all_gather_now(Buffer buf) {
  if (buf.count == 0) return;
  const size_t n = static_cast<size_t>(size());
  if (buf.count % n == 0) {
    const size_t per = buf.count / n;
    NCCL_CHECK(
        ncclAllGather(buf.at(per * static_cast<size_t>(rank())), buf.data, per, nccl_type(buf.dtype), comm_, stream_));
  } else {
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < size(); ++r) {
      const Range c = chunk_range(buf.count, size(), r);
      if (c.size() > 0)
        NCCL_CHECK(ncclBroadcast(buf.at(c.begin), buf.at(c.begin), c.size(), nccl_type(buf.dtype), r, comm_, stream_));
    }
    NCCL_CHECK(ncclGroupEnd());
  }
  complete("all_gather");
}

void NcclCommunicator::broadcast_now(Buffer buf, int root) {
  if (buf.count == 0) return;
  NCCL_CHECK(ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, comm_, stream_));
  complete("broadcast");
}

void NcclCommunicator::barrier_now() {
  // NCCL has no barrier: a one-element all-reduce orders every rank the same way.
  void* one = nullptr;
  CUDA_CHECK(cudaMallocAsync(&one, sizeof(float), stream_));
  CUDA_CHECK(cudaMemsetAsync(one, 0, sizeof(float), stream_));
  NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm_, stream_));
  CUDA_CHECK(cudaFreeAsync(one, stream_));
  complete("barrier");
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  ncclConfig_t config = nonblocking_config();
  ncclComm_t sub = nullptr;
  NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, &config));
  settle("ncclCommSplit");
  if (color < 0 || sub == nullptr) return nullptr;
  int sub_rank = 0;
  int sub_size = 0;
  // A fresh non-blocking communicator may still be initialising: wait before asking for its shape.
  for (const auto deadline = Clock::now() + timeout();;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(sub, &state));
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) NCCL_CHECK(state);
    if (Clock::now() > deadline) {
      ncclCommAbort(sub);
      throw Timeout("ncclCommSplit: the new communicator did not come up in time");
    }
    pause_briefly();
  }
  NCCL_CHECK(ncclCommUserRank(sub, &sub_rank));
  NCCL_CHECK(ncclCommCount(sub, &sub_size));
  return std::unique_ptr<Communicator>(new NcclCommunicator(sub_rank, sub_size, sub, device_, timeout()));
}

}  // namespace torus::comm

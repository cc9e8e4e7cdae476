#pragma once
// The GPU backend: NCCL. Buffers are device pointers; collectives run on the communicator's own CUDA stream (the
// communication stream, so they overlap with compute on other streams). The communicator is created non-blocking
// (ncclCommInitRankConfig with blocking = 0) so every wait has a deadline; on a timeout the communicator is
// aborted (ncclCommAbort) and the call throws Timeout. Rank 0's ncclUniqueId travels through the store.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {

class NcclCommunicator : public Communicator {
 public:
  // `device` is the CUDA device of this rank (usually LOCAL_RANK).
  NcclCommunicator(int rank, int size, std::shared_ptr<Store> store, int device, milliseconds timeout);
  ~NcclCommunicator() override;

  void all_reduce_now(Buffer buf, ReduceOp op) override;
  // In place with NCCL's own kernels when count divides evenly; otherwise an all-reduce (a superset of the
  // result) or per-chunk broadcasts keep the uneven chunk_range layout.
  void reduce_scatter_now(Buffer buf, ReduceOp op) override;
  void all_gather_now(Buffer buf) override;
  void broadcast_now(Buffer buf, int root) override;
  void barrier_now() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "nccl"; }
  void abort() noexcept override;

  cudaStream_t stream() const { return stream_; }

 private:
  NcclCommunicator(int rank, int size, ncclComm_t comm, int device, milliseconds timeout);
  // Waits for the communicator's non-blocking init/split/enqueue to settle (ncclInProgress -> ncclSuccess).
  void settle(const char* what);
  // Waits for everything queued on the stream, checking NCCL's asynchronous errors; aborts on the deadline.
  void complete(const char* what);

  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  bool aborted_ = false;
};

}  // namespace torus::comm

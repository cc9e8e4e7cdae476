#pragma once
// The host-local level: ranks on the same host exchange through one POSIX shared-memory segment instead of loopback
// TCP (the CPU analogue of NVLink). Every collective is split into windows; in each window every rank copies its
// part in, all ranks reduce or gather their own slice in parallel (so bandwidth scales with the ranks), and two
// double-buffered barriers order the phases. Barriers are atomics plus a futex with a deadline: a dead local peer
// becomes a Timeout naming it, never an endless spin.
#include <atomic>
#include <memory>
#include <string>

#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {

struct ShmOptions {
  // Bytes each rank owns per buffer set (two sets, double buffering): the segment is 2 * size * slot_bytes.
  size_t slot_bytes = 512u << 10;  // see WorldOptions::shm_slot_bytes
  milliseconds timeout{30000};
};

class ShmCommunicator : public Communicator {
 public:
  static constexpr int kMaxRanks = 64;

  // Collective over the `size` ranks of one host; `store` is already prefixed for this group. Local rank 0 creates
  // the segment and unlinks its name once everyone has mapped it (nothing is left in /dev/shm after a crash).
  ShmCommunicator(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options);
  ~ShmCommunicator() override;

  void all_reduce_now(BufferView buf, ReduceOp op) override;
  void reduce_scatter_now(BufferView buf, ReduceOp op) override;
  void all_gather_now(BufferView buf) override;
  void broadcast_now(BufferView buf, int root) override;
  void barrier_now() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "shm"; }
  void abort() noexcept override;

 private:
  struct Header;
  class Mapping;

  void sync();  // the barrier
  std::byte* slot(int set, int rank) const;
  size_t segment_bytes() const;
  static int spin_limit_for(int ranks);
  int next_set() { return static_cast<int>(phase_++ & 1); }

  ShmOptions options_;
  std::unique_ptr<Mapping> mapping_;
  Header* header_ = nullptr;
  std::byte* slots_ = nullptr;
  uint64_t epoch_ = 0;
  uint64_t phase_ = 0;
  int spin_limit_ = 0;
};

}  // namespace torus::comm

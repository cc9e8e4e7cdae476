#pragma once
// The host-local level: ranks on the same host exchange through one POSIX shared-memory segment instead of loopback
// TCP (the CPU analogue of NVLink). Every collective is split into windows of a cache-sized slot; all ranks reduce or
// gather their own slice of a window in parallel (so bandwidth scales with the ranks). All-reduce is pipelined: each
// rank has a ring of slots and three progress counters (windows staged, reduced, gathered); a rank does whatever
// work its peers' counters allow (gather a reduced window, reduce a staged one, stage the next) instead of waiting
// at a barrier per phase, so a rank that gets the CPU while its peer is descheduled runs ahead by up to a ring.
// The other collectives use double-buffered barriers. Every wait is atomics plus a futex with a deadline: a dead
// local peer becomes an error naming it, never an endless spin.
#include <atomic>
#include <memory>
#include <string>

#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {

struct ShmOptions {
  // Bytes each rank owns per buffer set (two sets, double buffering): the segment is 2 * size * slot_bytes.
  size_t slot_bytes = 1u << 20;  // see WorldOptions::shm_slot_bytes
  // All-reduce's ring: slots per rank, so how many windows a rank may stage ahead of its slowest peer. Two measured
  // best on 2 loaded cores: 4 and 8 cut context switches per 64 MiB all-reduce from ~150 to ~50 and ~35 but cost
  // more CPU time (16-24 ms instead of 14-17 per rank), the staged windows no longer fitting in L2.
  int ring_slots = 2;
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
  // Returns once `ready()`; sleeps on the futex after a short spin; throws on abort, when a peer j that is
  // `lagging(j)` has died, or after the timeout (naming the lagging peers and `what`).
  template <typename Ready, typename Lagging>
  void wait_until(Ready ready, Lagging lagging, const char* what);
  void publish();  // wakes sleeping waiters after a progress counter moved
  std::byte* slot(int set, int rank) const;
  std::byte* ring_slot(uint64_t window, int rank) const;
  size_t segment_bytes() const;
  static int spin_limit_for(int ranks);
  int next_set() { return static_cast<int>(phase_++ & 1); }

  ShmOptions options_;
  std::unique_ptr<Mapping> mapping_;
  Header* header_ = nullptr;
  std::byte* slots_ = nullptr;
  uint64_t epoch_ = 0;
  uint64_t phase_ = 0;
  uint64_t windows_ = 0;  // all-reduce windows so far (the same on every rank): the ring's sequence numbers
  int spin_limit_ = 0;
};

}  // namespace torus::comm

#pragma once
// One call from the rank environment to a ready world: rendezvous store (served by rank 0), authenticated join with
// missing-rank errors, topology, cost model printed once, the topology-aware world communicator and its watchdog.
//   auto world = torus::comm::make_world(torus::launch::rank_env_from_environment(), options);
//   world->comm().all_reduce(view_of(grads)).wait(world->timeout());
#include <memory>
#include <optional>
#include <string>

#include "common/launch/rank_env.h"
#include "common/util/tunables.h"
#include "worker/comm/store.h"
#include "worker/comm/topology.h"
#include "worker/comm/topology_communicator.h"
#include "worker/comm/watchdog.h"

namespace torus::comm {

// Who serves the rendezvous store: rank 0's process (production), or someone else (tests, an external launcher).
enum class StoreServing { kRankZero, kExternal };

// The job's knobs (timeout, algorithm, torus_x) come from the TrainingJob (worker/app/run_options.h); the rest are
// developer tunables (common/util/tunables.h).
struct WorldOptions {
  // Per-collective timeout (watchdog and backends): spec.allReduce.timeoutSeconds.
  milliseconds timeout{300000};
  // How long ranks wait for each other (and for rank 0's store) at start-up. TORUS_RENDEZVOUS_TIMEOUT_MS.
  milliseconds rendezvous_timeout{120000};
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;  // spec.allReduce.algorithm
  bool shared_memory = true;                                 // TORUS_SHM=0 turns the host-local fast path off
  // TORUS_SHM_SLOT_BYTES: the window reduced at a time. Small enough that both ranks' slices stay in cache
  // (measured at 64 MiB, 2 ranks, before the pipelined all-reduce on an idle machine: 16 MiB windows 2.3 GB/s bus
  // bandwidth, 2 MiB 3.0, 512 KiB 3.9), large enough that a window's work outweighs its hand-offs: with the
  // pipelined all-reduce on 2 loaded cores, 1 MiB windows took 0.1-0.16 / 0.4-1.0 ms of CPU per all-reduce of
  // 1 / 4 MiB where 512 KiB took 0.33-0.48 / 1.4-2.2; at 64 MiB the same within noise (docs/collectives.md).
  size_t shm_slot_bytes = 1u << 20;
  int torus_x = 0;  // spec.allReduce.grid.x, 0 = automatic
  CostModel cost;   // TORUS_COST_*
  TimeoutAction on_timeout = TimeoutAction::kExitProcess;
  StoreServing store_serving = StoreServing::kRankZero;
  // Address this rank's Gloo device binds (TORUS_COMM_BIND_ADDR); default: the rank environment's bind address
  // (TORUS_BIND_ADDRESS, a pod's IP), else loopback when MASTER_ADDR is loopback, else the host name.
  std::string bind_host;

  // The developer tunables above (not the job's knobs) from `env`.
  static WorldOptions from_tunables(const tunables::Snapshot& env = tunables::process_snapshot());
};

class World {
 public:
  World(RankEnv env, WorldOptions options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const RankEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }
  milliseconds timeout() const { return options_.timeout; }
  const Topology& topology() const { return comm_->planner().topology(); }
  TopologyCommunicator& comm() { return *comm_; }
  // The job's store namespace ("<job>/<attempt>/..."), for other components' rendezvous needs.
  std::shared_ptr<Store> store() { return store_; }
  Watchdog& watchdog() { return *watchdog_; }
  // For other communicators of this rank (NCCL for gradients): their collectives get the same deadlines and reports.
  std::shared_ptr<Watchdog> shared_watchdog() { return watchdog_; }

 private:
  void join();

  RankEnv env_;
  WorldOptions options_;
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 only
  std::shared_ptr<Store> store_;
  std::shared_ptr<Watchdog> watchdog_;
  std::unique_ptr<TopologyCommunicator> comm_;
};

// gethostname(): in a pod, the pod's name; "" when it cannot be read.
std::string own_host_name();

std::unique_ptr<World> make_world(const RankEnv& env, const WorldOptions& options = WorldOptions::from_tunables());

}  // namespace torus::comm

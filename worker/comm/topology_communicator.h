#pragma once
// The world communicator: our topology-aware all-reduce over a backend (Gloo) and the host-local shared-memory level.
//   ring          the backend's own all-reduce over all ranks, in rack order;
//   hierarchical  reduce-scatter inside each node (shared memory when the node is one host), all-reduce of each slice
//                 across nodes among the ranks with the same local rank, all-gather inside the node (Tencent 2018);
//   torus2d       X x Y grid in ring order: reduce-scatter along rows, all-reduce along columns, all-gather along
//                 rows (Sony 2018); rows on one host use shared memory;
//   auto          the Planner's cheapest for the message size.
// Sub-communicators are created on first use (every rank reaches the same first use, so creation stays collective).
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "worker/comm/communicator.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/shm_communicator.h"
#include "worker/comm/topology.h"
#include "worker/comm/traffic.h"

namespace torus::comm {

// nccl-tests' bus bandwidth: algorithm bandwidth x 2(n-1)/n, comparable across world sizes.
double bus_bandwidth(size_t bytes, double seconds, int ranks);

class TopologyCommunicator : public Communicator {
 public:
  TopologyCommunicator(int rank, Planner planner, std::shared_ptr<Store> store, const GlooOptions& gloo,
                       const ShmOptions& shm, AllReduceAlgorithm algorithm);
  ~TopologyCommunicator() override;

  void all_reduce_now(BufferView buf, ReduceOp op) override;
  // Runs one all-reduce with an explicit algorithm (tests, benchmarks); kAuto asks the planner.
  void all_reduce_with(AllReduceAlgorithm algorithm, BufferView buf, ReduceOp op);
  void reduce_scatter_now(BufferView buf, ReduceOp op) override { world_->reduce_scatter_now(buf, op); }
  void all_gather_now(BufferView buf) override { world_->all_gather_now(buf); }
  void broadcast_now(BufferView buf, int root) override { world_->broadcast_now(buf, root); }
  void barrier_now() override { world_->barrier_now(); }
  std::unique_ptr<Communicator> split(int color, int key) override { return world_->split(color, key); }
  std::string backend() const override { return "gloo+shm"; }
  std::string algorithm_for(size_t bytes) const override;
  void abort() noexcept override;

  const Planner& planner() const { return planner_; }
  // Time and volume per algorithm and per level ({"hierarchical", "outer_all_reduce"}, ...), for metrics.
  std::map<TrafficKey, LevelStats> stats() const;

 private:
  AllReduceAlgorithm resolve(AllReduceAlgorithm requested, size_t bytes) const;
  void run_ring(BufferView buf, ReduceOp op);
  void run_two_level(const std::string& name, Communicator& inner, Communicator& outer, BufferView buf, ReduceOp op);
  Communicator& ring();
  void ensure_hierarchical();
  void ensure_torus();
  // A host-local group over shared memory when allowed, else a backend split of the world.
  std::unique_ptr<Communicator> make_group(const std::string& name, const std::vector<int>& members, bool host_local,
                                           int color);
  template <typename Fn>
  void timed(const TrafficKey& key, size_t bytes, Fn&& fn);

  Planner planner_;
  std::shared_ptr<Store> store_;
  GlooOptions gloo_;
  ShmOptions shm_;
  AllReduceAlgorithm algorithm_;
  std::unique_ptr<GlooCommunicator> world_;
  std::unique_ptr<Communicator> ring_;
  std::unique_ptr<Communicator> local_;
  std::unique_ptr<Communicator> cross_;
  std::unique_ptr<Communicator> row_;
  std::unique_ptr<Communicator> column_;
  mutable std::mutex stats_mu_;
  std::map<TrafficKey, LevelStats> stats_;
};

}  // namespace torus::comm

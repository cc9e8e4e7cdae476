#pragma once
// Where every rank runs, as plain data: built from the rank environment (all ranks publish their place through the
// store), dumpable as JSON and overridable from a file (TORUS_TOPOLOGY_FILE). The all-reduce algorithms and their
// cost model read only this struct.
#include <cstddef>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "common/util/tunables.h"
#include "worker/comm/store.h"

namespace torus::comm {

// The rank identity of the launch contract (common/launch/rank_env.h).
using launch::RankEnv;

struct RankPlace {
  int rank = 0;
  int node_rank = 0;      // which node (pod group) the rank belongs to
  int local_rank = 0;     // index within its node
  std::string node_name;  // the host: ranks of a node on one host share memory
  std::string block;      // rack / switch label; ring neighbours should share it
};

struct Topology {
  std::vector<RankPlace> ranks;  // index = rank

  int world_size() const { return static_cast<int>(ranks.size()); }
  // Ranks of each node, by node_rank, each sorted by local_rank.
  std::vector<std::vector<int>> nodes() const;
  int node_count() const { return static_cast<int>(nodes().size()); }
  // Every node has the same number of ranks, and local ranks are 0..L-1.
  bool uniform() const;
  int ranks_per_node() const;
  // Every rank of `members` runs on the same host (shared memory possible).
  bool same_host(const std::vector<int>& members) const;
  // Ring order: by (block, node_rank, local_rank), so neighbours in the ring share a rack whenever possible.
  std::vector<int> ring_order() const;

  std::string to_json() const;
  // `source` names the file or string in error messages.
  static Topology from_json(const std::string& text, const std::string& source);
  // Checks ranks are 0..n-1 exactly once and node/local ranks are consistent; InvalidArgument naming `source`.
  void validate(const std::string& source) const;
};

RankPlace place_of(const RankEnv& env);
// Exchanges every rank's place through `store` (keys "topology/<rank>"), or reads TORUS_TOPOLOGY_FILE if set.
Topology gather_topology(Store& store, const RankEnv& env, milliseconds timeout);

// The all-reduce algorithms over a topology are the job's spec.allReduce.algorithm (names: api::to_string).
using api::AllReduceAlgorithm;

// Latency per step and bandwidth of one kind of link (alpha-beta model).
struct LinkCost {
  double latency_s = 0;
  double bytes_per_s = 1;
};

// The cost model that `auto` uses: ring steps cost the backend's link (TCP), the intra-host level costs shared
// memory. Figures from this machine class (platform-notes.md, docs/collectives.md "Measured"): loopback/network TCP
// ~0.85 GB/s; shm 3.3 us per step (a 4 KiB all-reduce of 2 ranks: 6.6 us) and 4.4 GB/s at 64 MiB, the pipelined
// shm path measured on a quiet machine (docs/collectives.md "Quiet re-measure").
// Overridable via TORUS_COST_{SHM,NET}_{LATENCY_US,GBPS} (common/util/tunables.h).
struct CostModel {
  LinkCost shm{3.3e-6, 4.4e9};
  LinkCost net{60e-6, 0.85e9};

  static CostModel from_tunables(const tunables::Snapshot& env);
};

// The 2D-torus grid: X ranks per row (consecutive in ring order), Y rows. X as requested (spec.allReduce.grid.x) when
// > 0, else the divisor of n nearest sqrt(n) (X >= Y). X == n or X == 1 means no real grid. The one grid formula.
struct Grid {
  int x = 1;
  int y = 1;
};
Grid torus_grid(int world_size, int requested_x);

class Planner {
 public:
  Planner(Topology topology, CostModel cost, Grid grid, bool shm_enabled);

  bool applicable(AllReduceAlgorithm a) const;
  // Predicted seconds for one all-reduce of `bytes`; infinity where not applicable.
  double predict(AllReduceAlgorithm a, size_t bytes) const;
  // The fastest applicable algorithm for `bytes`.
  AllReduceAlgorithm choose(size_t bytes) const;
  // The table printed at start-up: predicted time per algorithm for a few sizes, and the choice.
  std::string describe() const;

  const Topology& topology() const { return topology_; }
  const Grid& grid() const { return grid_; }
  bool node_is_host_local(int node_index) const;
  bool row_is_host_local(int row) const;
  // Global ranks of torus row / column containing `rank`, in ring order.
  std::vector<int> row_members(int row) const;
  std::vector<int> column_members(int column) const;
  // Position of `rank` in ring order.
  int ring_position(int rank) const;

 private:
  double ring_cost(int n, size_t bytes, const LinkCost& link) const;
  Topology topology_;
  CostModel cost_;
  Grid grid_;
  bool shm_enabled_;
  std::vector<int> ring_;
};

}  // namespace torus::comm

#include "worker/comm/topology_communicator.h"

#include <algorithm>

#include "common/log/log.h"
#include "common/metrics/rates.h"
#include "common/util/error.h"

namespace torus::comm {

double bus_bandwidth(size_t bytes, double seconds, int ranks) {
  return metrics::bus_bandwidth(static_cast<double>(bytes), seconds, ranks);
}

TopologyCommunicator::TopologyCommunicator(int rank, Planner planner, std::shared_ptr<Store> store,
                                           const GlooOptions& gloo, const ShmOptions& shm, AllReduceAlgorithm algorithm)
    : Communicator(rank, planner.topology().world_size(), gloo.timeout),
      planner_(std::move(planner)),
      store_(std::move(store)),
      gloo_(gloo),
      shm_(shm),
      algorithm_(algorithm) {
  if (algorithm_ != AllReduceAlgorithm::kAuto && !planner_.applicable(algorithm_))
    throw InvalidArgument("spec.allReduce.algorithm: " + std::string(api::to_string(algorithm_)) +
                          " does not apply to this world (" + std::to_string(size()) + " ranks, " +
                          std::to_string(planner_.topology().node_count()) + " nodes)");
  world_ = std::make_unique<GlooCommunicator>(rank, size(), std::make_shared<PrefixStore>("world", store_), gloo_);
}

TopologyCommunicator::~TopologyCommunicator() { stop_thread(); }

void TopologyCommunicator::abort() noexcept {
  for (Communicator* c :
       {static_cast<Communicator*>(world_.get()), ring_.get(), local_.get(), cross_.get(), row_.get(), column_.get()})
    if (c != nullptr) c->abort();
}

AllReduceAlgorithm TopologyCommunicator::resolve(AllReduceAlgorithm requested, size_t bytes) const {
  if (requested == AllReduceAlgorithm::kAuto) requested = algorithm_;
  if (requested == AllReduceAlgorithm::kAuto) return planner_.choose(bytes);
  if (!planner_.applicable(requested))
    throw InvalidArgument("all-reduce algorithm " + std::string(api::to_string(requested)) +
                          " does not apply to this world");
  return requested;
}

std::string TopologyCommunicator::algorithm_for(size_t bytes) const {
  return std::string(api::to_string(resolve(algorithm_, bytes)));
}

std::map<TrafficKey, LevelStats> TopologyCommunicator::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

template <typename Fn>
void TopologyCommunicator::timed(const TrafficKey& key, size_t bytes, Fn&& fn) {
  const auto start = Clock::now();
  fn();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::lock_guard lock(stats_mu_);
  LevelStats& s = stats_[key];
  s.calls += 1;
  s.bytes += bytes;
  s.seconds += seconds;
}

void TopologyCommunicator::all_reduce_now(BufferView buf, ReduceOp op) {
  all_reduce_with(AllReduceAlgorithm::kAuto, buf, op);
}

void TopologyCommunicator::all_reduce_with(AllReduceAlgorithm algorithm, BufferView buf, ReduceOp op) {
  const AllReduceAlgorithm a = resolve(algorithm, buf.bytes());
  if (buf.count == 0 || size() == 1) return;
  timed({std::string(api::to_string(a))}, buf.bytes(), [&] {
    switch (a) {
      case AllReduceAlgorithm::kAuto:
      case AllReduceAlgorithm::kRing:
        return run_ring(buf, op);
      case AllReduceAlgorithm::kHierarchical:
        ensure_hierarchical();
        return run_two_level("hierarchical", *local_, *cross_, buf, op);
      case AllReduceAlgorithm::kTorus2d:
        ensure_torus();
        return run_two_level("torus2d", *row_, *column_, buf, op);
    }
  });
}

void TopologyCommunicator::run_ring(BufferView buf, ReduceOp op) { ring().all_reduce_now(buf, op); }

void TopologyCommunicator::run_two_level(const std::string& name, Communicator& inner, Communicator& outer, BufferView buf,
                                         ReduceOp op) {
  // A level of one rank adds nothing: one node (shared memory only) or one rank per node (backend only).
  if (outer.size() == 1) return timed({name, "inner_all_reduce"}, buf.bytes(), [&] { inner.all_reduce_now(buf, op); });
  if (inner.size() == 1) return timed({name, "outer_all_reduce"}, buf.bytes(), [&] { outer.all_reduce_now(buf, op); });
  timed({name, "inner_reduce_scatter"}, buf.bytes(), [&] { inner.reduce_scatter_now(buf, op); });
  const Range mine = chunk_range(buf.count, inner.size(), inner.rank());
  const BufferView slice = buf.slice(mine.begin, mine.end);
  timed({name, "outer_all_reduce"}, slice.bytes(), [&] { outer.all_reduce_now(slice, op); });
  timed({name, "inner_all_gather"}, buf.bytes(), [&] { inner.all_gather_now(buf); });
}

Communicator& TopologyCommunicator::ring() {
  const std::vector<int> order = planner_.topology().ring_order();
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int>(i);
  if (identity) return *world_;
  if (!ring_) ring_ = world_->split(0, planner_.ring_position(rank()));
  return *ring_;
}

std::unique_ptr<Communicator> TopologyCommunicator::make_group(const std::string& name, const std::vector<int>& members,
                                                               bool host_local, int color) {
  const int index = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  if (host_local) {
    // Not a world split: only this group's ranks take part, through their own store prefix.
    return std::make_unique<ShmCommunicator>(index, static_cast<int>(members.size()),
                                             std::make_shared<PrefixStore>(name, store_), shm_);
  }
  return world_->split(color, index);
}

void TopologyCommunicator::ensure_hierarchical() {
  if (local_) return;
  const auto nodes = planner_.topology().nodes();
  const auto& me = planner_.topology().ranks[static_cast<size_t>(rank())];
  int node_index = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (std::find(nodes[i].begin(), nodes[i].end(), rank()) != nodes[i].end()) node_index = static_cast<int>(i);
  // Every rank makes the same splits in the same order, whether its own group is shared memory or not.
  const bool any_remote = [&] {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!planner_.node_is_host_local(static_cast<int>(i))) return true;
    return false;
  }();
  const bool local_shm = planner_.node_is_host_local(node_index);
  if (any_remote) {
    auto group = world_->split(local_shm ? -1 : node_index, me.local_rank);
    if (!local_shm) local_ = std::move(group);
  }
  if (local_shm)
    local_ = make_group("node" + std::to_string(node_index), nodes[static_cast<size_t>(node_index)], true, node_index);
  cross_ = world_->split(me.local_rank, planner_.ring_position(rank()));
  TLOG(Debug) << "hierarchical all-reduce: node " << node_index << " over " << local_->backend() << ", cross-node over "
              << cross_->backend();
}

void TopologyCommunicator::ensure_torus() {
  if (row_) return;
  const Grid g = planner_.grid();
  const int pos = planner_.ring_position(rank());
  const int row = pos / g.x;
  const int column = pos % g.x;
  bool any_remote = false;
  for (int r = 0; r < g.y; ++r) any_remote = any_remote || !planner_.row_is_host_local(r);
  const bool row_shm = planner_.row_is_host_local(row);
  if (any_remote) {
    auto group = world_->split(row_shm ? -1 : row, column);
    if (!row_shm) row_ = std::move(group);
  }
  if (row_shm) row_ = make_group("row" + std::to_string(row), planner_.row_members(row), true, row);
  column_ = world_->split(column, row);
}

}  // namespace torus::comm

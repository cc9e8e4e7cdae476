#include "worker/comm/topology.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/util/error.h"

namespace torus::comm {

using nlohmann::json;

std::vector<std::vector<int>> Topology::nodes() const {
  std::map<int, std::vector<std::pair<int, int>>> by_node;  // node_rank -> (local_rank, rank)
  for (const auto& p : ranks) by_node[p.node_rank].emplace_back(p.local_rank, p.rank);
  std::vector<std::vector<int>> out;
  for (auto& [node, members] : by_node) {
    std::sort(members.begin(), members.end());
    std::vector<int> rs;
    for (const auto& m : members) rs.push_back(m.second);
    out.push_back(std::move(rs));
  }
  return out;
}

bool Topology::uniform() const {
  auto ns = nodes();
  for (const auto& n : ns) {
    if (n.size() != ns.front().size()) return false;
    for (size_t i = 0; i < n.size(); ++i)
      if (ranks[static_cast<size_t>(n[i])].local_rank != static_cast<int>(i)) return false;
  }
  return true;
}

int Topology::ranks_per_node() const { return uniform() ? static_cast<int>(nodes().front().size()) : 0; }

bool Topology::same_host(const std::vector<int>& members) const {
  for (int r : members)
    if (ranks[static_cast<size_t>(r)].node_name != ranks[static_cast<size_t>(members.front())].node_name) return false;
  return true;
}

std::vector<int> Topology::ring_order() const {
  std::vector<int> order;
  for (const auto& p : ranks) order.push_back(p.rank);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& pa = ranks[static_cast<size_t>(a)];
    const auto& pb = ranks[static_cast<size_t>(b)];
    return std::tie(pa.block, pa.node_rank, pa.local_rank) < std::tie(pb.block, pb.node_rank, pb.local_rank);
  });
  return order;
}

std::string Topology::to_json() const {
  json ranks_json = json::array();
  for (const auto& p : ranks)
    ranks_json.push_back({{"rank", p.rank},
                          {"nodeRank", p.node_rank},
                          {"localRank", p.local_rank},
                          {"nodeName", p.node_name},
                          {"block", p.block}});
  return json{{"ranks", ranks_json}}.dump(2);
}

Topology Topology::from_json(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array())
    throw InvalidArgument(source + ": expected an object with a \"ranks\" array");
  Topology t;
  size_t i = 0;
  for (const auto& r : doc["ranks"]) {
    const std::string where = source + ": ranks[" + std::to_string(i++) + "]";
    auto int_field = [&](const char* name) {
      if (!r.contains(name) || !r[name].is_number_integer())
        throw InvalidArgument(where + "." + name + ": expected an integer");
      return r[name].get<int>();
    };
    RankPlace p;
    p.rank = int_field("rank");
    p.node_rank = int_field("nodeRank");
    p.local_rank = int_field("localRank");
    p.node_name = r.value("nodeName", "node" + std::to_string(p.node_rank));
    p.block = r.value("block", "");
    t.ranks.push_back(p);
  }
  std::sort(t.ranks.begin(), t.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  t.validate(source);
  return t;
}

void Topology::validate(const std::string& source) const {
  if (ranks.empty()) throw InvalidArgument(source + ": ranks: expected at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].rank != static_cast<int>(i))
      throw InvalidArgument(source + ": ranks: expected ranks 0.." + std::to_string(ranks.size() - 1) +
                            " exactly once; rank " + std::to_string(i) + " is missing or repeated");
    if (ranks[i].node_rank < 0 || ranks[i].local_rank < 0)
      throw InvalidArgument(source + ": rank " + std::to_string(i) + ": nodeRank and localRank must be >= 0");
  }
  std::set<std::pair<int, int>> seen;
  for (const auto& p : ranks)
    if (!seen.insert({p.node_rank, p.local_rank}).second)
      throw InvalidArgument(source + ": rank " + std::to_string(p.rank) + ": (nodeRank " + std::to_string(p.node_rank) +
                            ", localRank " + std::to_string(p.local_rank) + ") is used twice");
}

RankPlace place_of(const RankEnv& env) {
  return RankPlace{env.rank, env.node_rank, env.local_rank, env.node_name, env.topology_block};
}

Topology gather_topology(Store& store, const RankEnv& env, milliseconds timeout) {
  if (env.topology_file) {
    std::ifstream in(*env.topology_file);
    if (!in) throw InvalidArgument("TORUS_TOPOLOGY_FILE: cannot read '" + *env.topology_file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    Topology t = Topology::from_json(ss.str(), *env.topology_file);
    if (t.world_size() != env.world_size)
      throw InvalidArgument(*env.topology_file + ": describes " + std::to_string(t.world_size()) +
                            " ranks but WORLD_SIZE is " + std::to_string(env.world_size));
    return t;
  }
  const RankPlace me = place_of(env);
  json mine = {{"rank", me.rank},
               {"nodeRank", me.node_rank},
               {"localRank", me.local_rank},
               {"nodeName", me.node_name},
               {"block", me.block}};
  store.set("topology/" + std::to_string(env.rank), to_bytes(mine.dump()));
  std::vector<std::string> keys;
  for (int r = 0; r < env.world_size; ++r) keys.push_back("topology/" + std::to_string(r));
  std::vector<std::string> missing = store.wait(keys, timeout);
  if (!missing.empty()) {
    std::string names;
    for (const auto& k : missing) names += (names.empty() ? "" : ", ") + k.substr(k.find('/') + 1);
    throw Timeout("rendezvous: ranks " + names + " never arrived within " + std::to_string(timeout.count()) + " ms");
  }
  json all = {{"ranks", json::array()}};
  for (const auto& k : keys) all["ranks"].push_back(json::parse(to_string(store.get(k, timeout))));
  return Topology::from_json(all.dump(), "rank places in the store");
}

CostModel CostModel::from_tunables(const tunables::Snapshot& env) {
  CostModel c;
  c.shm.latency_s = env.number("TORUS_COST_SHM_LATENCY_US").value_or(c.shm.latency_s * 1e6) * 1e-6;
  c.shm.bytes_per_s = env.number("TORUS_COST_SHM_GBPS").value_or(c.shm.bytes_per_s / 1e9) * 1e9;
  c.net.latency_s = env.number("TORUS_COST_NET_LATENCY_US").value_or(c.net.latency_s * 1e6) * 1e-6;
  c.net.bytes_per_s = env.number("TORUS_COST_NET_GBPS").value_or(c.net.bytes_per_s / 1e9) * 1e9;
  return c;
}

Grid torus_grid(int world_size, int requested_x) {
  if (requested_x > 0) {
    if (world_size % requested_x != 0)
      throw InvalidArgument("spec.allReduce.grid.x: must divide the world size " + std::to_string(world_size) + ", got " +
                            std::to_string(requested_x));
    return {requested_x, world_size / requested_x};
  }
  int best = world_size;
  double best_gap = std::numeric_limits<double>::max();
  const double root = std::sqrt(static_cast<double>(world_size));
  for (int x = 1; x <= world_size; ++x) {
    if (world_size % x != 0 || x < world_size / x) continue;
    if (std::abs(x - root) < best_gap) {
      best_gap = std::abs(x - root);
      best = x;
    }
  }
  return {best, world_size / best};
}

Planner::Planner(Topology topology, CostModel cost, Grid grid, bool shm_enabled)
    : topology_(std::move(topology)), cost_(cost), grid_(grid), shm_enabled_(shm_enabled) {
  ring_ = topology_.ring_order();
}

int Planner::ring_position(int rank) const {
  return static_cast<int>(std::find(ring_.begin(), ring_.end(), rank) - ring_.begin());
}

bool Planner::node_is_host_local(int node_index) const {
  return shm_enabled_ && topology_.same_host(topology_.nodes()[static_cast<size_t>(node_index)]);
}

std::vector<int> Planner::row_members(int row) const {
  return std::vector<int>(ring_.begin() + row * grid_.x, ring_.begin() + (row + 1) * grid_.x);
}

std::vector<int> Planner::column_members(int column) const {
  std::vector<int> out;
  for (int row = 0; row < grid_.y; ++row) out.push_back(ring_[static_cast<size_t>(row * grid_.x + column)]);
  return out;
}

bool Planner::row_is_host_local(int row) const { return shm_enabled_ && topology_.same_host(row_members(row)); }

bool Planner::applicable(AllReduceAlgorithm a) const {
  switch (a) {
    case AllReduceAlgorithm::kAuto:
    case AllReduceAlgorithm::kRing:
      return true;
    case AllReduceAlgorithm::kHierarchical:
      return topology_.uniform() && topology_.ranks_per_node() > 1;
    case AllReduceAlgorithm::kTorus2d:
      return grid_.x > 1 && grid_.y > 1;
  }
  return false;
}

double Planner::ring_cost(int n, size_t bytes, const LinkCost& link) const {
  if (n <= 1) return 0;
  const double steps = 2.0 * (n - 1);
  return steps * link.latency_s + steps / n * static_cast<double>(bytes) / link.bytes_per_s;
}

double Planner::predict(AllReduceAlgorithm a, size_t bytes) const {
  if (!applicable(a)) return std::numeric_limits<double>::infinity();
  const int n = topology_.world_size();
  switch (a) {
    case AllReduceAlgorithm::kAuto:
      return predict(choose(bytes), bytes);
    case AllReduceAlgorithm::kRing:
      return ring_cost(n, bytes, cost_.net);
    case AllReduceAlgorithm::kHierarchical: {
      const int local = topology_.ranks_per_node();
      bool all_local = true;
      for (int i = 0; i < topology_.node_count(); ++i) all_local = all_local && node_is_host_local(i);
      const LinkCost& intra = all_local ? cost_.shm : cost_.net;
      // The L cross-node rings run in parallel but share the node's link: S bytes per node in total.
      return ring_cost(local, bytes, intra) + ring_cost(topology_.node_count(), bytes, cost_.net);
    }
    case AllReduceAlgorithm::kTorus2d: {
      bool rows_local = true;
      for (int r = 0; r < grid_.y; ++r) rows_local = rows_local && row_is_host_local(r);
      const LinkCost& row_link = rows_local ? cost_.shm : cost_.net;
      const size_t column_bytes = rows_local ? bytes : bytes / static_cast<size_t>(grid_.x);
      return ring_cost(grid_.x, bytes, row_link) + ring_cost(grid_.y, column_bytes, cost_.net);
    }
  }
  return std::numeric_limits<double>::infinity();
}

AllReduceAlgorithm Planner::choose(size_t bytes) const {
  AllReduceAlgorithm best = AllReduceAlgorithm::kRing;
  for (AllReduceAlgorithm a : {AllReduceAlgorithm::kHierarchical, AllReduceAlgorithm::kTorus2d})
    if (predict(a, bytes) < predict(best, bytes)) best = a;
  return best;
}

std::string Planner::describe() const {
  std::ostringstream os;
  os << "all-reduce cost model: world " << topology_.world_size() << ", " << topology_.node_count() << " nodes, "
     << (topology_.uniform() ? std::to_string(topology_.ranks_per_node()) + " ranks per node" : "non-uniform nodes")
     << ", torus grid " << grid_.x << "x" << grid_.y << "; shm " << cost_.shm.latency_s * 1e6 << " us + "
     << cost_.shm.bytes_per_s / 1e9 << " GB/s, net " << cost_.net.latency_s * 1e6 << " us + "
     << cost_.net.bytes_per_s / 1e9 << " GB/s\n";
  os << std::setw(10) << "bytes";
  for (AllReduceAlgorithm a :
       {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHierarchical, AllReduceAlgorithm::kTorus2d})
    os << ' ' << std::setw(15)
       << std::string(api::to_string(a)) + "_ms";  // "hierarchical_ms" is 15 wide: keep a space before it
  os << "  choice\n";
  for (size_t bytes : {size_t{4} << 10, size_t{1} << 20, size_t{25} << 20, size_t{256} << 20}) {
    os << std::setw(10) << bytes;
    for (AllReduceAlgorithm a :
         {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHierarchical, AllReduceAlgorithm::kTorus2d}) {
      const double t = predict(a, bytes);
      os << ' ' << std::setw(15);
      if (std::isinf(t))
        os << "-";
      else
        os << std::fixed << std::setprecision(3) << t * 1e3;
    }
    os << "  " << api::to_string(choose(bytes)) << "\n";
  }
  return os.str();
}

}  // namespace torus::comm

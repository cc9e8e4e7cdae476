#pragma once
// Rack ordering in Kubernetes: a pod cannot read its node's labels, so the operator reads the nodes' label
// `spec.runPolicy.topology.key` and hands every worker a node -> block map through the job's ConfigMap; the worker
// looks its own node up (TORUS_TOPOLOGY_BLOCKS_FILE) and orders the ring by block. Pure functions.
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torus::controller {

using json = nlohmann::json;

// node name -> block (the node's value of the topology label), sorted by node name.
using BlockMap = std::map<std::string, std::string>;

// The ConfigMap key holding the map, mounted next to job.json.
inline constexpr std::string_view kBlocksFileName = "topology-blocks.json";
// ConfigMaps are limited to 1 MiB; past this much map the job runs without rack ordering.
inline constexpr size_t kMaxBlockMapBytes = 900 * 1024;

// Every node in `nodes` that carries label `key`, with that label's value.
BlockMap block_map(const std::vector<json>& nodes, const std::string& key);
// The map as the ConfigMap stores it: one JSON object, keys sorted, deterministic.
std::string block_map_text(const BlockMap& blocks);

// Whether a job's workers get the map, and why not.
enum class RackOrdering { kNotRequested, kMounted, kTooLarge, kNodesNotReadable };

struct BlocksPlan {
  RackOrdering ordering = RackOrdering::kNotRequested;
  std::string text;  // the ConfigMap entry, when kMounted
};

// `topology_key`: the job's runPolicy.topology.key; `blocks`: nullopt when the operator cannot read nodes.
BlocksPlan plan_blocks(const std::string& topology_key, const std::optional<BlockMap>& blocks);

}  // namespace torus::controller

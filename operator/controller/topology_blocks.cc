#include "operator/controller/topology_blocks.h"

namespace torus::controller {

BlockMap block_map(const std::vector<json>& nodes, const std::string& key) {
  BlockMap out;
  if (key.empty()) return out;
  for (const auto& node : nodes) {
    const json md = node.value("metadata", json::object());
    const json labels = md.value("labels", json::object());
    auto it = labels.find(key);
    std::string name = md.value("name", "");
    if (it == labels.end() || !it->is_string() || name.empty()) continue;
    out[name] = it->get<std::string>();
  }
  return out;
}

std::string block_map_text(const BlockMap& blocks) { return json(blocks).dump(); }

BlocksPlan plan_blocks(const std::string& topology_key, const std::optional<BlockMap>& blocks) {
  if (topology_key.empty()) return {};
  if (!blocks) return {RackOrdering::kNodesNotReadable, ""};
  std::string text = block_map_text(*blocks);
  if (text.size() > kMaxBlockMapBytes) return {RackOrdering::kTooLarge, ""};
  return {RackOrdering::kMounted, std::move(text)};
}

}  // namespace torus::controller

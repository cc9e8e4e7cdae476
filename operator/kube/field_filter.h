#pragma once
// Which fields of a watched object an informer keeps, applied while its watch events are parsed: the fields it
// leaves out are stepped over, never built into the DOM (no node, no string allocated for them). A worker
// pod's spec (containers, env, volumes, ...) is most of its JSON and the operator reads only its nodeName from the
// cache; a real API server's metadata.managedFields is as large and read by no one (client-go informers strip it with
// a transform, after the whole object is built).
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace torus::kube {

using json = nlohmann::json;

class FieldFilter {
 public:
  // Leaves out the member at the dotted path ("metadata.managedFields").
  FieldFilter& drop(std::string_view path);
  // Keeps, of the object at the dotted path ("spec"), only the members named; paths under a kept member may have
  // rules of their own.
  FieldFilter& keep_only(std::string_view path, const std::vector<std::string>& members);
  bool empty() const { return root_.children.empty(); }

  // The same filter on an object already parsed (a list's items), so that listed and watched objects look alike.
  void apply(json& object) const;
  // Parses one watch event line ({"type": ..., "object": {...}}), the filter applied to its "object", with a reader
  // of its own that scans in runs (nlohmann's lexer, a byte at a time, was most of the operator's parse cost). What it
  // keeps equals json::parse's; a document that is not valid JSON is returned discarded (is_discarded()), as
  // json::parse(text, nullptr, false) does (a value left out is checked for closed strings and matched brackets).
  json parse_event(std::string_view line) const;

  struct Node {
    enum class Rule { kDescend, kDrop, kKeepOnly };
    Rule rule = Rule::kDescend;
    std::map<std::string, Node, std::less<>> children;
  };

 private:
  Node& node_at(std::string_view path);

  Node root_;
  Node event_root_;  // {"object": root_}: what parse_event walks, kept in step with root_
};

}  // namespace torus::kube

#include "tests/apiserver/scheduling.h"

#include <cstdlib>

namespace torus::standin {
namespace {

const json& member(const json& object, const char* key, const json& fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_structured() ? *it : fallback;
}

const json kEmptyObject = json::object();
const json kEmptyArray = json::array();

// One nodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) against a node's labels.
bool requirement_holds(const json& requirement, const json& labels) {
  const std::string key = requirement.value("key", "");
  const std::string op = requirement.value("operator", "");
  const bool has = labels.contains(key);
  const std::string value = has && labels[key].is_string() ? labels[key].get<std::string>() : "";
  const json& values = member(requirement, "values", kEmptyArray);
  auto listed = [&] {
    for (const json& v : values) {
      if (v.is_string() && v.get<std::string>() == value) return true;
    }
    return false;
  };
  if (op == "In") return has && listed();
  if (op == "NotIn") return !has || !listed();
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if ((op == "Gt" || op == "Lt") && has && !values.empty() && values[0].is_string()) {
    const long long mine = std::atoll(value.c_str()), bound = std::atoll(values[0].get<std::string>().c_str());
    return op == "Gt" ? mine > bound : mine < bound;
  }
  return false;
}

bool node_affinity_holds(const json& pod, const NodeView& node) {
  const json& spec = member(pod, "spec", kEmptyObject);
  for (const auto& [key, value] : member(spec, "nodeSelector", kEmptyObject).items()) {
    if (!node.labels.contains(key) || node.labels[key] != value) return false;
  }
  const json& required = member(member(member(spec, "affinity", kEmptyObject), "nodeAffinity", kEmptyObject),
                                "requiredDuringSchedulingIgnoredDuringExecution", kEmptyObject);
  const json& terms = member(required, "nodeSelectorTerms", kEmptyArray);
  if (terms.empty()) return true;
  for (const json& term : terms) {  // terms are ORed, their expressions ANDed
    bool all = true;
    for (const json& r : member(term, "matchExpressions", kEmptyArray)) all = all && requirement_holds(r, node.labels);
    if (all) return true;
  }
  return false;
}

bool tolerated(const json& taint, const json& tolerations) {
  for (const json& t : tolerations) {
    const std::string effect = t.value("effect", "");
    if (!effect.empty() && effect != taint.value("effect", "")) continue;
    const std::string key = t.value("key", "");
    if (t.value("operator", "Equal") == "Exists") {
      if (key.empty() || key == taint.value("key", "")) return true;
    } else if (key == taint.value("key", "") && t.value("value", "") == taint.value("value", "")) {
      return true;
    }
  }
  return false;
}

// The first taint the pod does not tolerate (NoSchedule or NoExecute; PreferNoSchedule only steers), or null.
json untolerated_taint(const json& pod, const NodeView& node) {
  const json& tolerations = member(member(pod, "spec", kEmptyObject), "tolerations", kEmptyArray);
  for (const json& taint : node.taints) {
    const std::string effect = taint.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    if (!tolerated(taint, tolerations)) return taint;
  }
  return nullptr;
}

// The topology domain of `node` under `key` ("" when the node has no such label).
std::string domain(const std::vector<NodeView>& nodes, const std::string& node, const std::string& key) {
  for (const NodeView& n : nodes) {
    if (n.name == node && n.labels.contains(key) && n.labels[key].is_string()) return n.labels[key];
  }
  return "";
}

bool selector_matches(const json& selector, const json& labels) {
  for (const auto& [key, value] : member(selector, "matchLabels", kEmptyObject).items()) {
    if (!labels.contains(key) || labels[key] != value) return false;
  }
  for (const json& r : member(selector, "matchExpressions", kEmptyArray)) {
    if (!requirement_holds(r, labels)) return false;
  }
  return true;
}

// A metav1.LabelSelector (matchLabels and matchExpressions, ANDed); a term without one selects no pod.
bool term_selects(const json& term, const std::string& ns, const PlacedPod& other) {
  if (other.ns != ns) return false;  // the project's terms name no namespaces: the pod's own
  auto it = term.find("labelSelector");
  if (it == term.end() || !it->is_object()) return false;
  return selector_matches(*it, other.labels);
}

// Required pod affinity: some selected pod in the node's domain (or, for the first of a gang, none anywhere and the
// pod selects itself, as kube-scheduler allows). Anti-affinity: no selected pod in the node's domain.
std::string pod_affinity_reason(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                                const std::vector<PlacedPod>& placed) {
  const json& affinity = member(member(pod, "spec", kEmptyObject), "affinity", kEmptyObject);
  const std::string ns = pod["metadata"].value("namespace", "");
  const PlacedPod self{ns, member(pod["metadata"], "labels", kEmptyObject), "", 0, 0};
  for (const json& term : member(member(affinity, "podAntiAffinity", kEmptyObject),
                                 "requiredDuringSchedulingIgnoredDuringExecution", kEmptyArray)) {
    const std::string key = term.value("topologyKey", "");
    const std::string here = domain(nodes, node.name, key);
    for (const PlacedPod& other : placed) {
      if (!here.empty() && term_selects(term, ns, other) && domain(nodes, other.node, key) == here) {
        return "node(s) didn't match pod anti-affinity rules";
      }
    }
  }
  for (const json& term : member(member(affinity, "podAffinity", kEmptyObject),
                                 "requiredDuringSchedulingIgnoredDuringExecution", kEmptyArray)) {
    const std::string key = term.value("topologyKey", "");
    const std::string here = domain(nodes, node.name, key);
    bool anywhere = false, near = false;
    for (const PlacedPod& other : placed) {
      if (!term_selects(term, ns, other)) continue;
      anywhere = true;
      near = near || (!here.empty() && domain(nodes, other.node, key) == here);
    }
    if (near || (!anywhere && term_selects(term, ns, self) && !here.empty())) continue;
    return "node(s) didn't match pod affinity rules";
  }
  return "";
}

}  // namespace

double cpu_cores(const json& quantity) {
  if (quantity.is_number()) return quantity.get<double>();
  if (!quantity.is_string()) return 0;
  const std::string text = quantity.get<std::string>();
  if (!text.empty() && text.back() == 'm') return std::atof(text.substr(0, text.size() - 1).c_str()) / 1000.0;
  return std::atof(text.c_str());
}

namespace {
// The container's request for `resource`, its limit when it has no request.
const json* requested(const json& container, const char* resource) {
  const json& resources = member(container, "resources", kEmptyObject);
  for (const char* section : {"requests", "limits"}) {
    const json& values = member(resources, section, kEmptyObject);
    if (values.contains(resource)) return &values[resource];
  }
  return nullptr;
}
}  // namespace

double cpu_requested(const json& pod) {
  double total = 0;
  for (const json& c : member(member(pod, "spec", kEmptyObject), "containers", kEmptyArray)) {
    if (const json* q = requested(c, "cpu")) total += cpu_cores(*q);
  }
  return total;
}

int gpus_requested(const json& pod) {
  int total = 0;
  for (const json& c : member(member(pod, "spec", kEmptyObject), "containers", kEmptyArray)) {
    if (const json* q = requested(c, "nvidia.com/gpu")) {
      total += q->is_number() ? q->get<int>() : std::atoi(q->get<std::string>().c_str());
    }
  }
  return total;
}

bool label_selector_matches(const json& selector, const json& labels) {
  return selector_matches(selector, labels.is_object() ? labels : kEmptyObject);
}

std::string unfit_reason(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                         const std::vector<PlacedPod>& placed) {
  if (node.unschedulable) {
    static const json kUnschedulableTaint = {{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}};
    if (!tolerated(kUnschedulableTaint, member(member(pod, "spec", kEmptyObject), "tolerations", kEmptyArray))) {
      return "node(s) were unschedulable";
    }
  }
  if (!node_affinity_holds(pod, node)) return "node(s) didn't match Pod's node affinity/selector";
  if (const json taint = untolerated_taint(pod, node); !taint.is_null()) {
    return "node(s) had untolerated taint {" + taint.value("key", "") + ": " + taint.value("value", "") + "}";
  }
  double cpu = 0;
  int gpus = 0;
  for (const PlacedPod& other : placed) {
    if (other.node != node.name) continue;
    cpu += other.cpu;
    gpus += other.gpus;
  }
  if (cpu + cpu_requested(pod) > node.cpu + 1e-9) return "Insufficient cpu";
  if (gpus + gpus_requested(pod) > node.gpus) return "Insufficient nvidia.com/gpu";
  return pod_affinity_reason(pod, node, nodes, placed);
}

std::string unschedulable_message(size_t nodes, const std::map<std::string, int>& reasons) {
  std::string out = "0/" + std::to_string(nodes) + " nodes are available:";
  bool first = true;
  for (const auto& [reason, count] : reasons) {
    out += (first ? " " : ", ") + std::to_string(count) + " " + reason;
    first = false;
  }
  return out + ".";
}

}  // namespace torus::standin

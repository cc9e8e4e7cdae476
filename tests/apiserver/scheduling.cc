#include "tests/apiserver/scheduling.h"

#include <algorithm>
#include <cstdlib>

#include "common/util/error.h"
#include "tests/apiserver/pod_root.h"

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

const json& tolerations_of(const json& pod) { return member(member(pod, "spec", kEmptyObject), "tolerations", kEmptyArray); }

bool tolerated(const json& taint, const json& tolerations) {
  for (const json& t : tolerations) {
    if (tolerates(t, taint)) return true;
  }
  return false;
}

// The first taint of `effects` the pod does not tolerate, or null (TaintToleration's Filter: NoSchedule and
// NoExecute; PreferNoSchedule only scores).
json untolerated_taint(const json& pod, const NodeView& node) {
  for (const json& taint : node.taints) {
    const std::string effect = taint.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    if (!tolerated(taint, tolerations_of(pod))) return taint;
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
  const PlacedPod self = placed_pod(pod, "");
  const std::string& ns = self.ns;
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

namespace {
double cpu_of(const json& container) {
  const json* q = requested(container, "cpu");
  return q ? cpu_cores(*q) : 0;
}

int gpus_of(const json& container) {
  const json* q = requested(container, "nvidia.com/gpu");
  if (q == nullptr) return 0;
  return q->is_number() ? q->get<int>() : std::atoi(q->get<std::string>().c_str());
}

double memory_of(const json& container) {
  const json* q = requested(container, "memory");
  if (q == nullptr) return 0;
  if (q->is_number()) return q->get<double>();
  try {
    return static_cast<double>(parse_quantity(q->get<std::string>(), "memory"));
  } catch (const InvalidArgument&) {
    return 0;  // the apiserver refuses such a pod before a scheduler sees it
  }
}

// kube-scheduler's effective request: max(the containers' sum, each init container's), as resource.PodRequests.
template <typename Amount>
auto pod_request(const json& pod, Amount amount) {
  const json& spec = member(pod, "spec", kEmptyObject);
  decltype(amount(json())) total = 0;
  for (const json& c : member(spec, "containers", kEmptyArray)) total += amount(c);
  for (const json& c : member(spec, "initContainers", kEmptyArray)) total = std::max(total, amount(c));
  return total;
}
}  // namespace

double cpu_requested(const json& pod) { return pod_request(pod, cpu_of); }
int gpus_requested(const json& pod) { return pod_request(pod, gpus_of); }
double memory_requested(const json& pod) { return pod_request(pod, memory_of); }

NodeView node_view(const json& node) {
  const json& meta = member(node, "metadata", kEmptyObject);
  const json& spec = member(node, "spec", kEmptyObject);
  const json& allocatable = member(member(node, "status", kEmptyObject), "allocatable", kEmptyObject);
  NodeView v{meta.value("name", ""), member(meta, "labels", kEmptyObject), member(spec, "taints", kEmptyArray)};
  const json amounts = {{"resources", {{"requests", allocatable}}}};  // read as a container's requests are
  v.cpu = cpu_of(amounts);
  v.gpus = gpus_of(amounts);
  v.memory = memory_of(amounts);
  v.unschedulable = spec.value("unschedulable", false);
  return v;
}

PlacedPod placed_pod(const json& pod, const std::string& node) {
  const json& meta = member(pod, "metadata", kEmptyObject);
  return PlacedPod{meta.value("namespace", ""), member(meta, "labels", kEmptyObject), node, cpu_requested(pod),
                   gpus_requested(pod), memory_requested(pod)};
}

json parse_taint(const std::string& text, const std::string& field) {
  const size_t colon = text.rfind(':');
  const std::string effect = colon == std::string::npos ? "" : text.substr(colon + 1);
  const std::string key_value = colon == std::string::npos ? text : text.substr(0, colon);
  const size_t eq = key_value.find('=');
  const std::string key = key_value.substr(0, eq);
  if (key.empty() || (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute")) {
    throw InvalidArgument(field + ": expected a taint KEY[=VALUE]:EFFECT with EFFECT NoSchedule, PreferNoSchedule or " +
                          "NoExecute (nvidia.com/gpu=present:NoSchedule), got \"" + text + "\"");
  }
  json taint = {{"key", key}, {"effect", effect}};
  if (eq != std::string::npos) taint["value"] = key_value.substr(eq + 1);
  return taint;
}

bool tolerates(const json& toleration, const json& taint) {
  const std::string effect = toleration.value("effect", "");
  if (!effect.empty() && effect != taint.value("effect", "")) return false;
  const std::string key = toleration.value("key", "");
  if (!key.empty() && key != taint.value("key", "")) return false;
  const std::string op = toleration.value("operator", "");
  if (op.empty() || op == "Equal") return toleration.value("value", "") == taint.value("value", "");
  return op == "Exists";
}

bool label_selector_matches(const json& selector, const json& labels) {
  return selector_matches(selector, labels.is_object() ? labels : kEmptyObject);
}

std::vector<std::string> unfit_reasons(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                                       const std::vector<PlacedPod>& placed) {
  if (node.unschedulable) {
    static const json kUnschedulableTaint = {{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}};
    if (!tolerated(kUnschedulableTaint, tolerations_of(pod))) return {"node(s) were unschedulable"};
  }
  if (const json taint = untolerated_taint(pod, node); !taint.is_null()) {
    return {"node(s) had untolerated taint {" + taint.value("key", "") + ": " + taint.value("value", "") + "}"};
  }
  if (!node_affinity_holds(pod, node)) return {"node(s) didn't match Pod's node affinity/selector"};
  PlacedPod used;
  for (const PlacedPod& other : placed) {
    if (other.node != node.name) continue;
    used.cpu += other.cpu;
    used.gpus += other.gpus;
    used.memory += other.memory;
  }
  const PlacedPod mine = placed_pod(pod, node.name);
  std::vector<std::string> short_of;  // NodeResourcesFit names every resource that is short
  if (mine.cpu > 0 && used.cpu + mine.cpu > node.cpu + 1e-9) short_of.push_back("Insufficient cpu");
  if (mine.memory > 0 && used.memory + mine.memory > node.memory) short_of.push_back("Insufficient memory");
  if (mine.gpus > 0 && used.gpus + mine.gpus > node.gpus) short_of.push_back("Insufficient nvidia.com/gpu");
  if (!short_of.empty()) return short_of;
  if (std::string reason = pod_affinity_reason(pod, node, nodes, placed); !reason.empty()) return {reason};
  return {};
}

std::string unfit_reason(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                         const std::vector<PlacedPod>& placed) {
  const std::vector<std::string> reasons = unfit_reasons(pod, node, nodes, placed);
  return reasons.empty() ? "" : reasons.front();
}

int intolerable_prefer_no_schedule(const json& pod, const NodeView& node) {
  json preferring = json::array();  // PreScore: the tolerations of effect PreferNoSchedule or of every effect
  for (const json& t : tolerations_of(pod)) {
    const std::string effect = t.value("effect", "");
    if (effect.empty() || effect == "PreferNoSchedule") preferring.push_back(t);
  }
  int count = 0;
  for (const json& taint : node.taints) {
    if (taint.value("effect", "") == "PreferNoSchedule" && !tolerated(taint, preferring)) ++count;
  }
  return count;
}

Placement choose_node(const json& pod, const std::vector<NodeView>& nodes, const std::vector<PlacedPod>& placed) {
  Placement out;
  std::vector<std::pair<const NodeView*, int>> feasible;  // node, intolerable PreferNoSchedule taints
  int most = 0;
  for (const NodeView& n : nodes) {
    const std::vector<std::string> reasons = unfit_reasons(pod, n, nodes, placed);
    for (const std::string& r : reasons) ++out.reasons[r];
    if (!reasons.empty()) continue;
    feasible.emplace_back(&n, intolerable_prefer_no_schedule(pod, n));
    most = std::max(most, feasible.back().second);
  }
  std::map<std::string, int> load;
  for (const PlacedPod& p : placed) ++load[p.node];
  // TaintToleration's NormalizeScore (DefaultNormalizeScore, reversed): 100 when no node has such a taint.
  auto score = [&](int count) { return most == 0 ? 100 : 100 - 100 * count / most; };
  const NodeView* best = nullptr;
  int best_score = -1;
  for (const auto& [node, count] : feasible) {
    const int s = score(count);
    if (s > best_score || (s == best_score && load[node->name] < load[best->name])) {
      best = node;
      best_score = s;
    }
  }
  if (best != nullptr) out.node = best->name;
  return out;
}

std::optional<std::chrono::seconds> noexecute_grace(const json& pod, const json& taints) {
  // GetMatchingTolerations: each NoExecute taint's first matching toleration, or evict now.
  std::optional<int64_t> shortest;
  bool any = false;
  for (const json& taint : taints.is_array() ? taints : kEmptyArray) {
    if (taint.value("effect", "") != "NoExecute") continue;
    any = true;
    const json* used = nullptr;
    for (const json& t : tolerations_of(pod)) {
      if (tolerates(t, taint)) {
        used = &t;
        break;
      }
    }
    if (used == nullptr) return std::chrono::seconds(0);
    // getMinTolerationTime: a toleration without tolerationSeconds tolerates forever, one of <= 0 seconds not at all.
    if (used->contains("tolerationSeconds") && (*used)["tolerationSeconds"].is_number_integer()) {
      const int64_t seconds = std::max<int64_t>((*used)["tolerationSeconds"].get<int64_t>(), 0);
      shortest = shortest ? std::min(*shortest, seconds) : seconds;
    }
  }
  if (!any || !shortest) return std::nullopt;
  return std::chrono::seconds(*shortest);
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

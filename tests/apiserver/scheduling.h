#pragma once
// kube-scheduler's filters and the scores that matter for what the project's pods use, as pure functions the
// simulated kubelet (kubelet_sim.h) schedules with and a test can run in-process: nodeSelector and required node
// affinity, taints against tolerations (the TaintToleration plugin: NoSchedule and NoExecute filter, PreferNoSchedule
// scores), CPU, memory and nvidia.com/gpu requests against allocatable, and required pod affinity / anti-affinity by
// topology key. Filters run in kube-scheduler's default plugin order (NodeUnschedulable, TaintToleration,
// NodeAffinity, NodeResourcesFit, InterPodAffinity). A pod that fits no node is told why, in kube-scheduler's words:
// "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint {dedicated: infra}.".
#include <chrono>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

using json = nlohmann::json;

// A node as the scheduler sees it (its Node object's labels, taints, allocatable and spec.unschedulable).
struct NodeView {
  std::string name;
  json labels = json::object();
  json taints = json::array();
  double cpu = 0;              // allocatable cores
  int gpus = 0;                // allocatable nvidia.com/gpu
  bool unschedulable = false;  // cordoned (`kubectl cordon`, `kubectl drain`): no new pod unless it tolerates that
  double memory = 0;           // allocatable bytes
};
// The view of a Node object as the API serves it.
NodeView node_view(const json& node);

// A pod bound (or being bound) to a node: what the resource and pod-affinity filters count.
struct PlacedPod {
  std::string ns;
  json labels = json::object();
  std::string node;
  double cpu = 0;
  int gpus = 0;
  double memory = 0;  // bytes
};
// `pod` on `node`, with what it requests.
PlacedPod placed_pod(const json& pod, const std::string& node);

// The taint GKE puts on GPU nodes, and the one NVIDIA's and the clouds' guides have a GPU node pool carry so that
// only pods asking for GPUs land there ("key=value:Effect", as `kubectl taint` writes it).
inline constexpr const char* kGpuNodeTaint = "nvidia.com/gpu=present:NoSchedule";
// "key=value:Effect" or "key:Effect" as a v1 Taint; throws torus::InvalidArgument naming `field` when it is not
// one (an empty key, or an effect other than NoSchedule, PreferNoSchedule, NoExecute).
json parse_taint(const std::string& text, const std::string& field);
// k8s.io/api's Toleration.ToleratesTaint: an empty effect matches every effect, an empty key every key (with
// operator Exists), Exists matches every value, Equal (or no operator) compares the value; other operators none.
bool tolerates(const json& toleration, const json& taint);

// A quantity of cores: "2", "500m", "1.5".
double cpu_cores(const json& quantity);
// The pod's requests as kube-scheduler counts them: the containers' sum, or the largest init container's when that
// is more (a container's limit stands for a missing request, as the apiserver defaults it).
double cpu_requested(const json& pod);
int gpus_requested(const json& pod);
double memory_requested(const json& pod);  // bytes

// A metav1.LabelSelector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist, ANDed) against an
// object's labels; an empty selector matches every object.
bool label_selector_matches(const json& selector, const json& labels);

// Why `node` cannot take `pod`, in kube-scheduler's words (the first failing filter's reasons: NodeResourcesFit
// names every resource that is short), or none when it can. A cordoned node is refused first, as kube-scheduler's
// NodeUnschedulable plugin does ("node(s) were unschedulable"), unless the pod tolerates the taint
// node.kubernetes.io/unschedulable:NoSchedule (DaemonSet pods do).
std::vector<std::string> unfit_reasons(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                                       const std::vector<PlacedPod>& placed);
// The first of them, or "" when the node fits.
std::string unfit_reason(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                         const std::vector<PlacedPod>& placed);
// The TaintToleration plugin's raw score: how many PreferNoSchedule taints of the node the pod's tolerations (those
// of effect PreferNoSchedule or none) do not tolerate; fewer is better.
int intolerable_prefer_no_schedule(const json& pod, const NodeView& node);

// Where kube-scheduler would bind `pod`: among the nodes that pass every filter, the best TaintToleration score
// (normalized as upstream: 100 * (1 - count / the largest count)), then the node with the fewest placed pods (the
// stand-in for the resource scores), then the first; "" when none fits, with every filter's reasons counted.
struct Placement {
  std::string node;
  std::map<std::string, int> reasons;
};
Placement choose_node(const json& pod, const std::vector<NodeView>& nodes, const std::vector<PlacedPod>& placed);

// The taint manager's verdict (kube-controller-manager's taint-eviction-controller) on a pod bound to a node with
// `taints`: nullopt while it may stay (no NoExecute taint, or each tolerated without tolerationSeconds), else how
// long it may still run: 0 when a NoExecute taint is not tolerated (or a toleration's seconds are <= 0), else the
// smallest tolerationSeconds among the tolerations that matched.
std::optional<std::chrono::seconds> noexecute_grace(const json& pod, const json& taints);
// "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
std::string unschedulable_message(size_t nodes, const std::map<std::string, int>& reasons);

}  // namespace torus::standin

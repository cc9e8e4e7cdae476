#pragma once
// kube-scheduler's filters for what the project's pods use, as pure functions the simulated kubelet (kubelet_sim.h)
// schedules with: nodeSelector and required node affinity, taints against tolerations, CPU and nvidia.com/gpu
// requests against allocatable, and required pod affinity / anti-affinity by topology key. A pod that fits no node
// is told why, in kube-scheduler's words: "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had
// untolerated taint {dedicated: infra}.".
#include <map>
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
};

// A pod bound (or being bound) to a node: what the resource and pod-affinity filters count.
struct PlacedPod {
  std::string ns;
  json labels = json::object();
  std::string node;
  double cpu = 0;
  int gpus = 0;
};

// A quantity of cores: "2", "500m", "1.5".
double cpu_cores(const json& quantity);
// The pod's requests (a container's limit stands for a missing request, as the apiserver defaults it).
double cpu_requested(const json& pod);
int gpus_requested(const json& pod);

// A metav1.LabelSelector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist, ANDed) against an
// object's labels; an empty selector matches every object.
bool label_selector_matches(const json& selector, const json& labels);

// Why `node` cannot take `pod`, in kube-scheduler's words, or "" when it can. A cordoned node is refused first, as
// kube-scheduler's NodeUnschedulable plugin does ("node(s) were unschedulable"), unless the pod tolerates the taint
// node.kubernetes.io/unschedulable:NoSchedule (DaemonSet pods do).
std::string unfit_reason(const json& pod, const NodeView& node, const std::vector<NodeView>& nodes,
                         const std::vector<PlacedPod>& placed);
// "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
std::string unschedulable_message(size_t nodes, const std::map<std::string, int>& reasons);

}  // namespace torus::standin

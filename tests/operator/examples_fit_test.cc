// Issue 38.6: every example fits the machine it names. Each example's worker pods, built by the operator's own
// builder from the job decoded and defaulted as the planner does, are scheduled with the stand-in's kube-scheduler
// filters (tests/apiserver/scheduling.h) on simulated nodes of the instance type the example names: that type's
// allocatable CPU and memory (after the EKS AMI's kube-reserved and eviction threshold), its GPUs, the labels such a
// node carries and, on GPU nodes, the nvidia.com/gpu:NoSchedule taint. A misfit is reported naming the example and
// why: requests above allocatable, a selector no node matches, an untolerated taint, GPUs older than the build's
// architectures, an interface name a pod lacks. And (issue 38.5) the same taint in the simulated kubelet: a GPU
// job's workers bind to the tainted GPU nodes, CPU workers without the toleration stay on the CPU node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/api/codec.h"
#include "common/api/validation.h"
#include "operator/controller/children.h"
#include "tests/apiserver/kubelet_sim.h"
#include "tests/apiserver/scheduling.h"
#include "tests/operator/planner_fixtures.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

namespace torus::controller::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using standin::NodeView;
using standin::PlacedPod;

// An EC2 instance type as an EKS node reports it. Allocatable follows the EKS AMI's bootstrap: kube-reserved CPU of
// 6% of the first core, 1% of the second, 0.5% of the next two and 0.25% of the rest; kube-reserved memory of
// 255 MiB + 11 MiB per pod the instance's network interfaces allow (eni-max-pods.txt), and the kubelet's 100 MiB
// eviction threshold. (The kernel's MemTotal is a little below the nominal memory: the examples keep a margin.)
struct Instance {
  std::string type;
  int vcpus;
  int memory_gib;
  int gpus;
  std::string gpu;         // the model, for messages
  int compute_capability;  // 80 for sm_80; 0 without GPUs
  int max_pods;
  bool network_topology;  // EC2 instance topology: EKS labels topology.k8s.aws/network-node-layer-1..3
};

const std::vector<Instance>& catalog() {
  static const std::vector<Instance> kInstances = {
      {"p4d.24xlarge", 96, 1152, 8, "A100", 80, 737, true},
      {"p5.48xlarge", 192, 2048, 8, "H100", 90, 100, true},
      {"p3.16xlarge", 64, 488, 8, "V100", 70, 234, false},
      {"m5.xlarge", 4, 16, 0, "", 0, 58, false},
  };
  return kInstances;
}

const Instance* find_instance(const std::string& type) {
  for (const Instance& i : catalog()) {
    if (i.type == type) return &i;
  }
  return nullptr;
}

// Node `index` of `instance` as the API serves it.
json node_object(const Instance& instance, int index) {
  const std::string name = instance.type + "-" + std::to_string(index);
  const double reserved_cores = 0.06 + (instance.vcpus > 1 ? 0.01 : 0) +
                                0.005 * std::clamp(instance.vcpus - 2, 0, 2) +
                                0.0025 * std::max(instance.vcpus - 4, 0);
  const long long millicores = std::llround((instance.vcpus - reserved_cores) * 1000);
  const long long memory_mi = instance.memory_gib * 1024LL - (255 + 11LL * instance.max_pods) - 100;
  json labels = {{"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"node.kubernetes.io/instance-type", instance.type},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"topology.kubernetes.io/zone", "us-east-1a"}};
  if (instance.network_topology) {  // one network block: every simulated node under the same network nodes
    for (int layer = 1; layer <= 3; ++layer) {
      labels["topology.k8s.aws/network-node-layer-" + std::to_string(layer)] = "nn-" + std::to_string(layer);
    }
  }
  json node = {{"metadata", {{"name", name}, {"labels", labels}}},
               {"spec", json::object()},
               {"status",
                {{"allocatable",
                  {{"cpu", std::to_string(millicores) + "m"},
                   {"memory", std::to_string(memory_mi) + "Mi"},
                   {"nvidia.com/gpu", std::to_string(instance.gpus)}}}}}};
  if (instance.gpus > 0) node["spec"]["taints"] = json::array({standin::parse_taint(standin::kGpuNodeTaint, "gpu")});
  return node;
}

// The CUDA architectures the build targets, read where they are set (cmake/TorusDependencies.cmake). CMake embeds
// each one's PTX too, so a GPU of an equal or later compute capability runs the build.
std::vector<int> build_architectures() {
  std::ifstream in(std::string(TORUS_SOURCE_DIR) + "/cmake/TorusDependencies.cmake");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  std::vector<int> out;
  if (std::regex_search(s, m, std::regex(R"(CMAKE_CUDA_ARCHITECTURES\s+"([0-9;]+)\")"))) {
    std::stringstream list(m[1].str());
    for (std::string a; std::getline(list, a, ';');) out.push_back(std::stoi(a));
  }
  return out;
}

// Whether a pod whose interfaces are lo and eth0 has one NCCL (or Gloo) would use: NCCL_SOCKET_IFNAME is a comma list
// of name prefixes ("=" before the list: exact names; "^": names to exclude); GLOO_SOCKET_IFNAME exact names.
bool selects_pod_interface(const std::string& name, std::string value) {
  bool exclude = false, exact = name == "GLOO_SOCKET_IFNAME";
  if (!value.empty() && value[0] == '^') exclude = true, value.erase(0, 1);
  if (!value.empty() && value[0] == '=') exact = true, value.erase(0, 1);
  bool listed = false;  // whether the list names eth0, the pod's only interface off the host
  std::stringstream list(value);
  for (std::string entry; std::getline(list, entry, ',');) {
    listed = listed || (exact ? entry == "eth0" : !entry.empty() && std::string("eth0").rfind(entry, 0) == 0);
  }
  return exclude ? !listed : listed;
}

// The machine the example names: its workers' node.kubernetes.io/instance-type selector, else the first instance
// type of the catalog its header (the comment lines before the document) names; "" when none.
std::string named_machine(const fs::path& file, const json& pod) {
  const json selector = pod["spec"].value("nodeSelector", json::object());
  if (selector.contains("node.kubernetes.io/instance-type")) return selector["node.kubernetes.io/instance-type"];
  std::ifstream in(file);
  std::string header;
  for (std::string line; std::getline(in, line) && line.rfind("#", 0) == 0;) header += line + "\n";
  size_t first = std::string::npos;
  std::string type;
  for (const Instance& i : catalog()) {
    const size_t at = header.find(i.type);
    if (at < first) first = at, type = i.type;
  }
  return type;
}

// Every way the example at `file` misses the machine it names, each naming the example; empty when it fits.
std::vector<std::string> misfits(const fs::path& file) {
  std::vector<std::string> out;
  const std::string what = "examples/" + file.filename().string() + ": ";
  json doc = api::to_json(api::load_job_file(file.string()));
  if (doc["metadata"].value("namespace", "").empty()) doc["metadata"]["namespace"] = "default";
  doc["metadata"]["uid"] = "uid-example";
  const api::TrainingJob job = defaulted(doc);
  std::vector<json> pods;
  for (int i = 0; i < job.spec.gang.workers.value_or(1); ++i) pods.push_back(build_worker_pod(job, i, 0));
  for (const json& c : pods[0]["spec"]["containers"]) {
    for (const json& e : c.value("env", json::array())) {
      const std::string name = e.value("name", "");
      if (name.ends_with("SOCKET_IFNAME") && !selects_pod_interface(name, e.value("value", ""))) {
        out.push_back(what + name + "=" + e.value("value", "") + " names no interface of a pod (lo, eth0)");
      }
    }
  }
  const std::string type = named_machine(file, pods[0]);
  const Instance* instance = find_instance(type);
  if (instance == nullptr) {
    out.push_back(what + (type.empty() ? "names no machine (a node.kubernetes.io/instance-type selector, or an "
                                         "instance type in its header)"
                                       : "names " + type + ", which this test's catalog of instance types lacks"));
    return out;
  }
  const std::vector<int> archs = build_architectures();
  if (standin::gpus_requested(pods[0]) > 0 && instance->compute_capability < *std::min_element(archs.begin(), archs.end())) {
    out.push_back(what + type + "'s " + instance->gpu + " is sm_" + std::to_string(instance->compute_capability) +
                  ", older than every architecture the build targets (cmake/TorusDependencies.cmake)");
  }
  std::vector<NodeView> nodes;
  for (size_t i = 0; i < pods.size(); ++i) nodes.push_back(standin::node_view(node_object(*instance, int(i))));
  std::vector<PlacedPod> placed;
  for (size_t i = 0; i < pods.size(); ++i) {
    const standin::Placement p = standin::choose_node(pods[i], nodes, placed);
    if (p.node.empty()) {
      out.push_back(what + "worker " + std::to_string(i) + " fits no " + type + " node: " +
                    standin::unschedulable_message(nodes.size(), p.reasons));
      break;
    }
    placed.push_back(standin::placed_pod(pods[i], p.node));
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

TEST(ExamplesFit, EveryExampleFitsTheMachineItNames) {
  ASSERT_FALSE(build_architectures().empty()) << "no CMAKE_CUDA_ARCHITECTURES in cmake/TorusDependencies.cmake";
  int examples = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(TORUS_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++examples;
    const std::vector<std::string> problems = misfits(entry.path());
    EXPECT_TRUE(problems.empty()) << joined(problems);
  }
  EXPECT_GE(examples, 3);
}

// An example of the old kind (the imagenet example before issue 38): the check names each way it misses.
TEST(ExamplesFit, ACheckNamesEachWayAnExampleMissesItsMachine) {
  const torus::test::TempDir tmp("torus-examples-fit");
  const fs::path dir = tmp.path();
  auto write = [&](const std::string& name, const std::string& gang) {
    std::ofstream(dir / name) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: old}\nspec:\n"
                                 "  gang:\n" << gang
                              << "  model: {arch: resnet50}\n  data: {dataset: synthetic}\n"
                                 "  training: {epochs: 1, batchSize: 64, lrSchedule: {type: one-cycle, peak: 0.1}}\n";
    return dir / name;
  };
  const std::vector<std::string> p3 = misfits(write(
      "p3.yaml", "    workers: 2\n    processesPerWorker: 8\n    device: gpu\n"
                 "    resources: {requests: {cpu: \"90\", memory: 480Gi}, limits: {memory: 480Gi}}\n"
                 "    template:\n      spec:\n        nodeSelector: {node.kubernetes.io/instance-type: p3.16xlarge}\n"
                 "        containers: [{name: worker, env: [{name: NCCL_SOCKET_IFNAME, value: ens5}]}]\n"));
  EXPECT_THAT(joined(p3), HasSubstr("examples/p3.yaml: NCCL_SOCKET_IFNAME=ens5 names no interface of a pod"));
  EXPECT_THAT(joined(p3), HasSubstr("p3.16xlarge's V100 is sm_70, older than every architecture the build targets"));
  EXPECT_THAT(joined(p3), HasSubstr("worker 0 fits no p3.16xlarge node: 0/2 nodes are available: 2 Insufficient cpu."));
  const std::vector<std::string> big = misfits(write(
      "big.yaml", "    workers: 1\n    device: gpu\n    resources: {requests: {memory: 1200Gi}}\n"
                  "    template: {spec: {nodeSelector: {node.kubernetes.io/instance-type: p4d.24xlarge}}}\n"));
  EXPECT_THAT(joined(big), HasSubstr("0/1 nodes are available: 1 Insufficient memory."));
  const std::vector<std::string> zone = misfits(write(
      "zone.yaml", "    workers: 1\n    device: gpu\n    template: {spec: {nodeSelector: "
                   "{node.kubernetes.io/instance-type: p4d.24xlarge, topology.kubernetes.io/zone: us-west-2a}}}\n"));
  EXPECT_THAT(joined(zone), HasSubstr("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."));
  const std::vector<std::string> cpu = misfits(write(
      "cpu.yaml", "    workers: 1\n    template: {spec: {nodeSelector: {node.kubernetes.io/instance-type: "
                  "p4d.24xlarge}}}\n"));
  EXPECT_THAT(joined(cpu), HasSubstr("0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: "
                                     "present}."));
  EXPECT_THAT(joined(misfits(write("none.yaml", "    workers: 1\n"))), HasSubstr("examples/none.yaml: names no machine"));
  EXPECT_TRUE(selects_pod_interface("NCCL_SOCKET_IFNAME", "^lo,docker"));
  EXPECT_TRUE(selects_pod_interface("NCCL_SOCKET_IFNAME", "eth"));
  EXPECT_FALSE(selects_pod_interface("NCCL_SOCKET_IFNAME", "=eth"));
  EXPECT_FALSE(selects_pod_interface("NCCL_SOCKET_IFNAME", "^eth"));
  EXPECT_FALSE(selects_pod_interface("GLOO_SOCKET_IFNAME", "eth"));
}

// Issue 38.5 in the simulated kubelet: two GPU nodes tainted as a GPU cluster's are, one CPU node. CPU workers (no
// toleration) go to the CPU node even while it is the busiest; a GPU job's workers, which the operator makes tolerate
// the taint, bind to the GPU nodes.
TEST(GpuNodes, GpuWorkersBindToTaintedGpuNodesAndCpuWorkersStayOff) {
  standin::ApiServer server;
  standin::Store& store = server.store();
  standin::KubeletOptions options;
  options.pool.nodes = 3;
  options.pool.gpu_nodes = 2;
  options.pool.gpu_taint = standin::parse_taint(standin::kGpuNodeTaint, "gpu");
  standin::KubeletSim kubelet(store, options);
  const auto& pods = *store.registry().find("", "v1", "pods");
  store.create(*store.registry().find("", "v1", "namespaces"), "", {{"metadata", {{"name", "team"}}}});
  auto create = [&](const json& job_doc) {
    const api::TrainingJob job = defaulted(job_doc);
    std::vector<std::string> names;
    for (int i = 0; i < job.spec.gang.workers.value_or(1); ++i) {
      const json pod = build_worker_pod(job, i, 0);
      store.create(pods, "team", pod);
      names.push_back(pod["metadata"]["name"]);
    }
    return names;
  };
  auto node_of = [&](const std::string& name) {
    std::string node;
    torus::test::eventually(
        [&] { return !(node = (*store.get(pods, "team", name))["spec"].value("nodeName", "")).empty(); },
        std::chrono::seconds(10), std::chrono::milliseconds(2));
    return node;
  };
  for (const std::string& name : create(JobBuilder("cpu").workers(3).build())) {
    EXPECT_EQ(node_of(name), "node-2") << name << " has no toleration of " << standin::kGpuNodeTaint;
  }
  std::set<std::string> gpu_nodes;
  for (const std::string& name : create(JobBuilder("gpu").workers(2).gpus(8).build())) gpu_nodes.insert(node_of(name));
  EXPECT_EQ(gpu_nodes, (std::set<std::string>{"node-0", "node-1"}));
}

}  // namespace
}  // namespace torus::controller::testing

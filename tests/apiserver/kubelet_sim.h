#pragma once
// A simulated scheduler + kubelet for the stand-in: it owns a pool of Nodes (with rack labels), binds each new pod
// of default-scheduler to a node that fits (scheduling.h: node selector and affinity, taints, CPU and GPU requests,
// required pod (anti-)affinity; the Node objects as they are now), and moves it Pending -> Running (podIP,
// Ready conditions, running containerStatuses). On command it terminates a pod's containers with an exit code
// (-> Succeeded/Failed per restartPolicy, or a container restart), or keeps chosen pods Pending as unschedulable
// (PodScheduled=False, reason Unschedulable). Pods being deleted are stopped and removed, as a kubelet does; a
// NoExecute taint deletes the pods that do not tolerate it (taint_eviction.h).
//
// Usable in-process (C++ API) and over HTTP: POST /_standin/kubelet with
//   {"action":"terminate","namespace":"ns","name":"pod","exitCode":137[,"container":"c","reason":"OOMKilled"]}
//   {"action":"holdPending","namespace":"ns","name":"pod"}  or  {"action":"holdPending","namespace":"ns",
//    "labelSelector":"job=a"}
//   {"action":"holdStart","namespace":"ns","labelSelector":"job=a"}  matching pods are bound but not started (Pending,
//    as while their images are pulled) until release
//   {"action":"release", same fields as holdPending}  (with labelSelector: every hold, start holds included)
//   {"action":"serveScheduler","name":"volcano"}  pods of that schedulerName are scheduled too (none but
//    default-scheduler's otherwise: another scheduler's pods stay Pending, as on a cluster without it)
//   {"action":"loadImage","archive":"/path/x.oci.tar"[,"nodes":["node-0"]]}  `kind load image-archive`
//   {"action":"publishImage","archive":"/path/x.oci.tar"}  the registry the nodes pull from holds its images
// With the process kubelet a bound pod first gets its sandbox (pod IP, Pending, containers waiting
// ContainerCreating), then Running once every container started; a container that cannot start yet shows the
// kubelet's waiting reason (ErrImagePull, ImagePullBackOff, CreateContainerConfigError) and the pod stays Pending.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/apiserver/process_kubelet.h"
#include "tests/apiserver/scheduling.h"
#include "tests/apiserver/selectors.h"
#include "tests/apiserver/server.h"
#include "tests/apiserver/store.h"
#include "tests/apiserver/taint_eviction.h"

namespace torus::standin {

struct NodePool {
  int nodes = 4;
  int racks = 2;  // nodes are split evenly: node-0..k-1 in rack-0, ...
  int gpus_per_node = 8;
  std::string rack_label = "topology.torus.dev/rack";
  // How many nodes (the first ones) carry the GPUs; -1: every node. The others are CPU nodes.
  int gpu_nodes = -1;
  // A v1 Taint (parse_taint(kGpuNodeTaint), as GPU clusters have) put on every node with GPUs; null: none, so that
  // pods without tolerations can use those nodes, as the many CPU tests do.
  json gpu_taint;
};

struct KubeletOptions {
  NodePool pool;
  // Time from a pod's binding until it runs (image pull and container start), 0 for at once.
  std::chrono::milliseconds start_delay{0};
  // Set: run every started pod's containers as local processes (process_kubelet.h) and report their real exits.
  std::optional<SandboxOptions> processes;
  // OCI image archives put on every node at the start (`kind load image-archive`), and into the registry the nodes
  // pull from; with `processes` only.
  std::vector<std::string> node_images, registry_images;
};

class KubeletSim {
 public:
  // Creates the nodes, makes pod deletion graceful (this kubelet finishes it) and starts watching pods.
  KubeletSim(Store& store, KubeletOptions options = {});
  // Same, and serves POST /_standin/kubelet on `server`.
  KubeletSim(ApiServer& server, KubeletOptions options = {});
  ~KubeletSim();  // stops the simulation thread; never throws
  KubeletSim(const KubeletSim&) = delete;
  KubeletSim& operator=(const KubeletSim&) = delete;

  // The pod's containers exit with `exit_code` (all of them, or only `container`), with `message` as their
  // state.terminated.message when not empty. Throws ApiError 404 when the pod does not exist, 409 when it is not
  // running on a node.
  void terminate(const std::string& ns, const std::string& pod, int exit_code, const std::string& container = "",
                 const std::string& reason = "", const std::string& message = "");
  // Keeps matching pods unscheduled (PodScheduled=False, Unschedulable) until release().
  void hold_pending(const std::string& ns, const std::string& pod);
  void hold_pending(const std::string& ns, const LabelSelector& selector);
  // Binds matching pods but does not start them (they stay Pending, scheduled) until release_all(): a start gate a
  // test opens instead of waiting out a start delay.
  void hold_start(const std::string& ns, const LabelSelector& selector);
  void release(const std::string& ns, const std::string& pod);
  // Schedules the pods of schedulerName `name` too (a test's stand-in for Volcano or scheduler-plugins); pods of a
  // name no one serves stay Pending with no condition, as on a cluster without that scheduler.
  void serve_scheduler(const std::string& name);
  void release_all();  // every hold; pods held at the start are started now

  std::vector<std::string> node_names() const;
  // The archive's images onto `nodes` (every node when empty), or into the registry; returns their references.
  // Throws ApiError 400 without the process kubelet, CorruptData for a bad archive.
  std::vector<std::string> load_image(const std::string& archive, std::vector<std::string> nodes = {});
  std::vector<std::string> publish_image(const std::string& archive);
  nlohmann::json handle_control(const nlohmann::json& request);

 private:
  struct Node {
    std::string name;
    json labels;
    int index;
  };
  void create_nodes();
  void run();
  void process(const json& pod);
  bool held(const json& pod) const;
  bool start_held(const json& pod) const;  // under mutex_
  void schedule(const json& pod);
  std::vector<NodeView> node_views() const;
  bool served(const json& pod) const;
  void mark_unschedulable(const json& pod, const std::string& message);
  void start(const std::string& ns, const std::string& name);
  void stop_and_remove(const json& pod);
  void release_capacity(const json& pod);
  void on_container_exit(const ProcessKubelet::Exit& exit);
  void on_progress(const ProcessKubelet::Progress& progress);
  void make_sandbox(json& pod);
  void reschedule_pending();
  // get -> change -> update of the status subresource, retried on conflict; false when the pod is gone.
  template <typename Change>
  bool update_status(const std::string& ns, const std::string& name, Change change);

  Store& store_;
  KubeletOptions options_;
  const ResourceType pods_;
  std::vector<Node> nodes_;
  mutable std::mutex mutex_;
  std::set<std::string> held_names_;  // "ns/name"
  std::vector<std::pair<std::string, LabelSelector>> held_selectors_;
  std::vector<std::pair<std::string, LabelSelector>> start_held_selectors_;
  std::set<std::string> gated_;  // "ns/name": bound pods a start hold keeps from starting
  std::map<std::string, PlacedPod> placed_;  // "ns/name" -> where it went, what it asked (scheduling.h)
  std::set<std::string> schedulers_{"default-scheduler"};  // the schedulerNames this simulation serves
  std::multimap<std::chrono::steady_clock::time_point, std::string> starts_;  // delayed starts, "ns/name"
  std::atomic<bool> stopping_{false};
  WatchStream* stream_ = nullptr;  // guarded by mutex_: cancelled by the destructor
  ApiServer* server_ = nullptr;
  std::thread thread_;
  std::unique_ptr<ProcessKubelet> processes_;  // with KubeletOptions::processes
  std::unique_ptr<TaintEviction> taint_eviction_;  // NoExecute taints evict the pods on their nodes
};

}  // namespace torus::standin

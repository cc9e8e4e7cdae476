#include "tests/apiserver/kubelet_sim.h"

#include <algorithm>

#include "common/log/log.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/pod_status.h"

namespace torus::standin {

namespace {

std::string pod_key(const json& pod) { return object_key(namespace_of(pod), name_of(pod)); }

std::string required(const json& request, const char* field) {
  if (!request.contains(field) || !request[field].is_string() || request[field].get<std::string>().empty()) {
    throw bad_request(std::string("kubelet: ") + field + ": required string");
  }
  return request[field].get<std::string>();
}

}  // namespace

KubeletSim::KubeletSim(Store& store, KubeletOptions options)
    : store_(store), options_(std::move(options)), pods_(*store.registry().find("", "v1", "pods")) {
  if (options_.pool.nodes < 1 || options_.pool.racks < 1) {
    throw InvalidArgument("kubelet: pool.nodes and pool.racks must be at least 1");
  }
  create_nodes();
  store_.set_pod_deletion(PodDeletion::kGraceful);
  taint_eviction_ = std::make_unique<TaintEviction>(store_);
  if (options_.processes) {
    processes_ = std::make_unique<ProcessKubelet>(
        store_, *options_.processes, [this](const ProcessKubelet::Exit& e) { on_container_exit(e); },
        [this](const ProcessKubelet::Progress& p) { on_progress(p); });
    for (const std::string& archive : options_.node_images) load_image(archive);
    for (const std::string& archive : options_.registry_images) publish_image(archive);
  } else if (!options_.node_images.empty() || !options_.registry_images.empty()) {
    throw InvalidArgument("kubelet: images can be loaded only with the process kubelet (KubeletOptions::processes)");
  }
  thread_ = std::thread([this] { run(); });
}

KubeletSim::KubeletSim(ApiServer& server, KubeletOptions options) : KubeletSim(server.store(), std::move(options)) {
  server_ = &server;
  server.set_control_handler("kubelet", [this](const json& request) { return handle_control(request); });
}

KubeletSim::~KubeletSim() {
  if (server_ != nullptr) server_->set_control_handler("kubelet", nullptr);
  stopping_ = true;
  {
    std::lock_guard lock(mutex_);
    if (stream_ != nullptr) stream_->cancel();
  }
  if (thread_.joinable()) thread_.join();
  processes_.reset();  // kills what still runs
  store_.set_pod_deletion(PodDeletion::kImmediate);
}

void KubeletSim::create_nodes() {
  const ResourceType& node_type = *store_.registry().find("", "v1", "nodes");
  int per_rack = (options_.pool.nodes + options_.pool.racks - 1) / options_.pool.racks;
  for (int i = 0; i < options_.pool.nodes; ++i) {
    Node node{"node-" + std::to_string(i), json::object(), i};
    node.labels = {{"kubernetes.io/hostname", node.name},
                   {"kubernetes.io/os", "linux"},
                   {"kubernetes.io/arch", "amd64"},
                   {options_.pool.rack_label, "rack-" + std::to_string(i / per_rack)}};
    std::string ip = node_ip(i);
    // An 8-GPU node's size (a p4d's 96 cores, 1152 GiB): what the GPU examples ask for per worker fits one.
    const bool gpus = options_.pool.gpu_nodes < 0 || i < options_.pool.gpu_nodes;
    json capacity = {{"cpu", "96"},
                     {"memory", "1152Gi"},
                     {"pods", "110"},
                     {"nvidia.com/gpu", std::to_string(gpus ? options_.pool.gpus_per_node : 0)}};
    json spec = {{"podCIDR", pod_subnet(i) + ".0/24"}};
    if (gpus && options_.pool.gpus_per_node > 0 && !options_.pool.gpu_taint.is_null()) {
      spec["taints"] = json::array({options_.pool.gpu_taint});
    }
    json object = {{"metadata", {{"name", node.name}, {"labels", node.labels}}},
                   {"spec", spec},
                   {"status",
                    {{"capacity", capacity},
                     {"allocatable", capacity},
                     {"addresses", json::array({{{"type", "InternalIP"}, {"address", ip}},
                                                {{"type", "Hostname"}, {"address", node.name}}})},
                     {"conditions",
                      json::array({pod_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")})},
                     {"nodeInfo", {{"kubeletVersion", "v1.32.0-torus-sim"}, {"architecture", "amd64"}}}}}};
    try {
      store_.create(node_type, "", object);
    } catch (const ApiError& e) {
      if (e.code() != 409) throw;  // a second simulation on the same store reuses the nodes
    }
    nodes_.push_back(node);
  }
}

std::vector<std::string> KubeletSim::node_names() const {
  std::vector<std::string> names;
  for (const Node& n : nodes_) names.push_back(n.name);
  return names;
}

void KubeletSim::run() {
  while (!stopping_) {
    WatchRequest request;
    request.type = store_.registry().find("", "v1", "pods");
    std::unique_ptr<WatchStream> stream = store_.watch(request);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stream_ = stream.get();
    }
    std::vector<WatchEvent> events;
    bool rewatch = false;
    while (!stopping_ && !rewatch) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
      {
        std::lock_guard lock(mutex_);
        if (!starts_.empty()) deadline = std::min(deadline, starts_.begin()->first);
      }
      WatchStream::Outcome outcome = stream->next(deadline, events);
      if (outcome == WatchStream::Outcome::kClosed) {
        std::lock_guard lock(mutex_);
        stream_ = nullptr;
        return;
      }
      // Dropped or expired like any client: watch again from the current state.
      rewatch = outcome == WatchStream::Outcome::kDropped || outcome == WatchStream::Outcome::kExpired;
      for (const WatchEvent& e : events) {
        try {
          if (e.type == "DELETED") {
            // Removed while its containers still run (a forced delete): they are stopped with the grace it was
            // deleted with, as a kubelet kills the containers of a pod gone from the API.
            if (processes_) {
              const json& m = (*e.object)["metadata"];
              const int64_t grace = m.value("deletionGracePeriodSeconds",
                                            (*e.object)["spec"].value("terminationGracePeriodSeconds", int64_t{30}));
              processes_->stop(namespace_of(*e.object), name_of(*e.object), std::chrono::seconds(grace));
            }
            release_capacity(*e.object);
            reschedule_pending();
          } else {
            process(*e.object);
          }
        } catch (const ApiError& error) {
          // The thread's top: a refused write is logged and the next event goes on (the pod changed under us).
          TLOG(Warn) << "kubelet: " << pod_key(*e.object) << ": " << error.what();
        }
      }
      std::vector<std::string> due;
      {
        std::lock_guard lock(mutex_);
        auto now = std::chrono::steady_clock::now();
        while (!starts_.empty() && starts_.begin()->first <= now) {
          due.push_back(starts_.begin()->second);
          starts_.erase(starts_.begin());
        }
      }
      for (const std::string& key : due) {
        auto slash = key.find('/');
        try {
          start(key.substr(0, slash), key.substr(slash + 1));
        } catch (const ApiError& error) {
          TLOG(Warn) << "kubelet: start " << key << ": " << error.what();
        }
      }
    }
    std::lock_guard lock(mutex_);
    stream_ = nullptr;
  }
}

bool KubeletSim::held(const json& pod) const {
  std::lock_guard lock(mutex_);
  if (held_names_.count(pod_key(pod))) return true;
  for (const auto& [ns, selector] : held_selectors_) {
    if ((ns.empty() || ns == namespace_of(pod)) && selector.matches(pod["metadata"].value("labels", json()))) {
      return true;
    }
  }
  return false;
}

// Under mutex_ (checked and recorded in one step, so a release between them cannot miss the pod).
bool KubeletSim::start_held(const json& pod) const {
  for (const auto& [ns, selector] : start_held_selectors_) {
    if ((ns.empty() || ns == namespace_of(pod)) && selector.matches(pod["metadata"].value("labels", json()))) {
      return true;
    }
  }
  return false;
}

void KubeletSim::process(const json& pod) {
  const json& meta = pod["metadata"];
  std::string phase = pod.value("status", json::object()).value("phase", "Pending");
  if (meta.contains("deletionTimestamp")) {
    // Running processes get their grace period; the pod goes once they ended (on_container_exit).
    const int64_t grace =
        meta.value("deletionGracePeriodSeconds", pod["spec"].value("terminationGracePeriodSeconds", 30));
    if (processes_ && processes_->stop(namespace_of(pod), name_of(pod), std::chrono::seconds(grace))) return;
    stop_and_remove(pod);
    return;
  }
  if (phase == "Succeeded" || phase == "Failed") {
    release_capacity(pod);
    return;
  }
  std::string node = pod["spec"].value("nodeName", "");
  if (node.empty()) {
    if (!served(pod)) return;  // another scheduler's pod: without it the pod stays Pending, with no condition
    if (held(pod)) {
      mark_unschedulable(pod, "0/" + std::to_string(nodes_.size()) +
                                  " nodes are available: pod held Pending by the test (simulated unschedulable).");
    } else {
      schedule(pod);
    }
    return;
  }
  taint_eviction_->pod_changed(pod);
  if (phase != "Pending") return;
  std::string key = pod_key(pod);
  {
    std::lock_guard lock(mutex_);
    if (start_held(pod)) {
      gated_.insert(key);
      return;
    }
  }
  if (options_.start_delay.count() == 0) {
    start(namespace_of(pod), name_of(pod));
    return;
  }
  std::lock_guard lock(mutex_);
  for (const auto& [when, k] : starts_) {
    if (k == key) return;
  }
  starts_.emplace(std::chrono::steady_clock::now() + options_.start_delay, key);
}

// The scheduler's view of the nodes: their Node objects as they are now (labels and taints a test or `kubectl taint`
// changed included).
std::vector<NodeView> KubeletSim::node_views() const {
  std::vector<NodeView> views;
  for (const ObjectPtr& node : store_.list(*store_.registry().find("", "v1", "nodes"), "").items) {
    views.push_back(node_view(*node));
  }
  return views;
}

bool KubeletSim::served(const json& pod) const {
  std::lock_guard lock(mutex_);
  return schedulers_.count(pod["spec"].value("schedulerName", "default-scheduler")) > 0;
}

void KubeletSim::schedule(const json& pod) {
  const std::vector<NodeView> nodes = node_views();
  const std::string key = pod_key(pod);
  Placement placement;
  {
    std::lock_guard lock(mutex_);
    if (placed_.count(key)) return;  // being bound by another thread (a release racing the watch)
    std::vector<PlacedPod> placed;
    for (const auto& [other, at] : placed_) placed.push_back(at);
    placement = choose_node(pod, nodes, placed);
    if (!placement.node.empty()) placed_[key] = placed_pod(pod, placement.node);
  }
  if (placement.node.empty()) {
    mark_unschedulable(pod, unschedulable_message(nodes.size(), placement.reasons));
    return;
  }
  try {
    store_.bind(namespace_of(pod), name_of(pod), placement.node);
  } catch (const ApiError&) {
    release_capacity(pod);  // deleted or bound meanwhile
  }
}

void KubeletSim::mark_unschedulable(const json& pod, const std::string& message) {
  if (has_condition(pod, "PodScheduled", "False", "Unschedulable")) return;
  update_status(namespace_of(pod), name_of(pod), [&](json& p) {
    if (!p["spec"].value("nodeName", "").empty()) return false;
    json conditions = json::array({pod_condition("PodScheduled", "False", "Unschedulable", message)});
    p["status"]["conditions"] = conditions;
    p["status"]["phase"] = "Pending";
    return true;
  });
}

void KubeletSim::make_sandbox(json& pod) {
  int index = 0;
  const std::string node = pod["spec"].value("nodeName", "");
  for (const Node& n : nodes_) {
    if (n.name == node) index = n.index;
  }
  standin::make_sandbox(pod, index, processes_ ? Containers::kStartLater : Containers::kRunAtOnce);
}

void KubeletSim::start(const std::string& ns, const std::string& name) {
  bool sandboxed = false;
  update_status(ns, name, [&](json& pod) {
    if (pod["spec"].value("nodeName", "").empty() || pod["metadata"].contains("deletionTimestamp")) return false;
    if (pod["status"].value("phase", "Pending") != "Pending") return false;
    sandboxed = true;
    if (pod["status"].contains("podIP")) return false;  // made before: its containers are on their way
    make_sandbox(pod);
    return true;
  });
  if (sandboxed && processes_) processes_->run(*store_.get(pods_, ns, name));
}

void KubeletSim::on_progress(const ProcessKubelet::Progress& progress) {
  try {
    update_status(progress.ns, progress.pod,
                  [&](json& pod) { return apply_progress(pod, progress.waiting, progress.image_ids); });
  } catch (const ApiError& e) {  // the process kubelet's thread: the pod changed meanwhile, logged
    TLOG(Warn) << "kubelet: " << progress.ns << "/" << progress.pod << ": " << e.what();
  }
}

std::vector<std::string> KubeletSim::load_image(const std::string& archive, std::vector<std::string> nodes) {
  if (!processes_) throw bad_request("kubelet: loadImage needs the process kubelet (--run-pods)");
  if (nodes.empty()) nodes = node_names();
  return processes_->images().load(archive, nodes);
}

std::vector<std::string> KubeletSim::publish_image(const std::string& archive) {
  if (!processes_) throw bad_request("kubelet: publishImage needs the process kubelet (--run-pods)");
  return processes_->images().publish(archive);
}

void KubeletSim::on_container_exit(const ProcessKubelet::Exit& exit) {
  try {
    const ObjectPtr pod = store_.get(pods_, exit.ns, exit.pod);
    if ((*pod)["metadata"].contains("deletionTimestamp")) {
      if (exit.pod_state == ProcessKubelet::Exit::Pod::kAllEnded) stop_and_remove(*pod);
      return;
    }
    terminate(exit.ns, exit.pod, exit.exit_code, exit.container, exit.reason, exit.message);
    // terminate() counted a restart: start the process again, after the kubelet's crash-loop back-off (10 s doubling
    // up to 5 minutes from the second restart on; the first is at once, as a kubelet's first restart is).
    const ObjectPtr after = store_.get(pods_, exit.ns, exit.pod);
    for (const json& c : (*after)["status"].value("containerStatuses", json::array())) {
      if (c.value("name", "") != exit.container || !c["state"].contains("running")) continue;
      const int restarts = c.value("restartCount", 0);
      const int doublings = std::min(std::max(restarts - 2, 0), 5);
      const auto delay = restarts <= 1 ? std::chrono::milliseconds(0)
                                       : std::min<std::chrono::milliseconds>(std::chrono::seconds(10 << doublings),
                                                                             std::chrono::minutes(5));
      processes_->restart(exit.ns, exit.pod, exit.container, delay);
    }
  } catch (const ApiError& e) {  // the process kubelet's thread: gone or changed meanwhile, logged
    TLOG(Warn) << "kubelet: " << exit.ns << "/" << exit.pod << " container " << exit.container << " exited "
               << exit.exit_code << ": " << e.what();
  }
}

void KubeletSim::terminate(const std::string& ns, const std::string& pod_name, int exit_code,
                           const std::string& container, const std::string& reason, const std::string& message) {
  bool found = update_status(ns, pod_name, [&](json& pod) {
    json& status = pod["status"];
    // A container that could not start ends a pod whose sandbox exists (it has a pod IP) but never ran.
    const bool sandboxed = status.value("phase", "") == "Pending" && status.contains("podIP") && processes_;
    if (status.value("phase", "") != "Running" && !sandboxed) {
      throw ApiError(
          409, "Conflict",
          "kubelet: pod " + ns + "/" + pod_name + " is not Running (phase " + status.value("phase", "Pending") + ")");
    }
    std::string policy = pod["spec"].value("restartPolicy", "Always");
    bool restarts = policy == "Always" || (policy == "OnFailure" && exit_code != 0);
    std::string now = now_rfc3339();
    std::string why = !reason.empty() ? reason : exit_code == 0 ? "Completed" : "Error";
    json terminated = {{"exitCode", exit_code},
                       {"reason", why},
                       {"startedAt", status.value("startTime", now)},
                       {"finishedAt", now},
                       {"containerID", container_id()}};
    if (!message.empty()) terminated["message"] = message;
    bool matched = false;
    for (json& c : status["containerStatuses"]) {
      if (!container.empty() && c.value("name", "") != container) continue;
      matched = true;
      if (restarts) {
        c["lastState"] = {{"terminated", terminated}};
        c["restartCount"] = c.value("restartCount", 0) + 1;
        c["state"] = {{"running", {{"startedAt", now}}}};
      } else {
        c["state"] = {{"terminated", terminated}};
        c["ready"] = false;
        c["started"] = false;
      }
    }
    if (!matched) throw bad_request("kubelet: pod " + ns + "/" + pod_name + " has no container \"" + container + "\"");
    if (restarts) return true;
    bool all_done = true;
    bool all_succeeded = true;
    for (const json& c : status["containerStatuses"]) {
      const json& state = c["state"];
      all_done = all_done && state.contains("terminated");
      all_succeeded = all_succeeded && state.contains("terminated") && state["terminated"].value("exitCode", 1) == 0;
    }
    for (json& c : status["conditions"]) {
      if (c["type"] == "Ready" || c["type"] == "ContainersReady") {
        c["status"] = "False";
        c["reason"] = all_done ? "PodCompleted" : "ContainersNotReady";
        c["lastTransitionTime"] = now;
      }
    }
    if (all_done) status["phase"] = all_succeeded ? "Succeeded" : "Failed";
    return true;
  });
  if (!found) throw not_found("pods", "", pod_name);
}

void KubeletSim::stop_and_remove(const json& pod) {
  release_capacity(pod);
  DeleteOptions now;
  now.grace_period_seconds = 0;
  try {
    store_.remove(pods_, namespace_of(pod), name_of(pod), now);
  } catch (const ApiError& e) {
    if (e.code() != 404) throw;
  }
}

void KubeletSim::release_capacity(const json& pod) {
  std::lock_guard lock(mutex_);
  placed_.erase(pod_key(pod));
}

void KubeletSim::reschedule_pending() {
  ListOptions unbound;
  unbound.fields = FieldSelector::parse("spec.nodeName=", supported_fields("pods"));
  for (const ObjectPtr& pod : store_.list(pods_, "", unbound).items) {
    if (!(*pod)["metadata"].contains("deletionTimestamp") && !held(*pod)) schedule(*pod);
  }
}

void KubeletSim::serve_scheduler(const std::string& name) {
  {
    std::lock_guard lock(mutex_);
    schedulers_.insert(name);
  }
  reschedule_pending();
}

void KubeletSim::hold_pending(const std::string& ns, const std::string& pod) {
  std::lock_guard lock(mutex_);
  held_names_.insert(object_key(ns, pod));
}

void KubeletSim::hold_pending(const std::string& ns, const LabelSelector& selector) {
  std::lock_guard lock(mutex_);
  held_selectors_.emplace_back(ns, selector);
}

void KubeletSim::release(const std::string& ns, const std::string& pod) {
  {
    std::lock_guard lock(mutex_);
    held_names_.erase(object_key(ns, pod));
  }
  reschedule_pending();
}

void KubeletSim::hold_start(const std::string& ns, const LabelSelector& selector) {
  std::lock_guard lock(mutex_);
  start_held_selectors_.emplace_back(ns, selector);
}

void KubeletSim::release_all() {
  std::set<std::string> gated;
  {
    std::lock_guard lock(mutex_);
    held_names_.clear();
    held_selectors_.clear();
    start_held_selectors_.clear();
    gated.swap(gated_);
  }
  for (const std::string& key : gated) {
    const size_t slash = key.find('/');
    start(key.substr(0, slash), key.substr(slash + 1));
  }
  reschedule_pending();
}

template <typename Change>
bool KubeletSim::update_status(const std::string& ns, const std::string& name, Change change) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    ObjectPtr current;
    try {
      current = store_.get(pods_, ns, name);
    } catch (const ApiError& e) {
      if (e.code() == 404) return false;
      throw;
    }
    json pod = *current;
    if (!change(pod)) return true;
    try {
      store_.update(pods_, ns, name, std::move(pod), Subresource::kStatus);
      return true;
    } catch (const ApiError& e) {
      if (e.code() == 404) return false;
      if (e.code() != 409) throw;
    }
  }
  throw ApiError(409, "Conflict", "kubelet: pod " + ns + "/" + name + " kept changing; status not written");
}

json KubeletSim::handle_control(const json& request) {
  if (!request.is_object()) throw bad_request("kubelet: the body must be a JSON object with an \"action\"");
  std::string action = request.value("action", "");
  if (action == "terminate") {
    if (!request.contains("exitCode") || !request["exitCode"].is_number_integer()) {
      throw bad_request("kubelet: exitCode: required integer");
    }
    terminate(required(request, "namespace"), required(request, "name"), request["exitCode"].get<int>(),
              request.value("container", ""), request.value("reason", ""));
  } else if (action == "holdStart") {
    hold_start(required(request, "namespace"), LabelSelector::parse(required(request, "labelSelector")));
  } else if (action == "holdPending" || action == "release") {
    std::string ns = required(request, "namespace");
    bool by_selector = request.contains("labelSelector");
    if (action == "holdPending" && by_selector) {
      hold_pending(ns, LabelSelector::parse(required(request, "labelSelector")));
    } else if (action == "holdPending") {
      hold_pending(ns, required(request, "name"));
    } else if (by_selector) {
      release_all();
    } else {
      release(ns, required(request, "name"));
    }
  } else if (action == "nodes") {
    return {{"nodes", node_names()}};
  } else if (action == "serveScheduler") {
    serve_scheduler(required(request, "name"));
  } else if (action == "loadImage") {
    return {{"images", load_image(required(request, "archive"), request.value("nodes", std::vector<std::string>{}))}};
  } else if (action == "publishImage") {
    return {{"images", publish_image(required(request, "archive"))}};
  } else {
    throw bad_request(
        "kubelet: action: expected terminate, holdPending, holdStart, release, nodes, serveScheduler, loadImage or "
        "publishImage; got \"" +
        action + "\"");
  }
  return make_status(200, "", "kubelet: " + action + " done");
}

}  // namespace torus::standin

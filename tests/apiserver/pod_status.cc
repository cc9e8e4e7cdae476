#include "tests/apiserver/pod_status.h"

#include <atomic>
#include <cstdio>
#include <random>

namespace torus::standin {

std::string node_ip(int i) { return "127.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1); }
std::string pod_subnet(int i) { return "127." + std::to_string(2 + i / 256) + "." + std::to_string(i % 256); }

bool has_condition(const json& pod, const std::string& type, const std::string& status, const std::string& reason) {
  for (const json& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type && c.value("status", "") == status && c.value("reason", "") == reason) return true;
  }
  return false;
}

json pod_condition(const std::string& type, const std::string& status, const std::string& reason,
                   const std::string& message) {
  json c = {{"type", type}, {"status", status}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now_rfc3339()}};
  if (!reason.empty()) c["reason"] = reason;
  if (!message.empty()) c["message"] = message;
  return c;
}

std::string container_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char text[40];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string("containerd://") + text;
}

namespace {

json container_status(const json& c, const std::string& image_id, bool running, const std::string& now) {
  json s = {{"name", c.value("name", "")}, {"image", c.value("image", "")},
            {"imageID", image_id},         {"ready", running},
            {"started", running},          {"restartCount", 0}};
  if (running) {
    s["containerID"] = container_id();
    s["state"] = {{"running", {{"startedAt", now}}}};
  } else {
    s["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
  }
  return s;
}

}  // namespace

void make_sandbox(json& pod, int node_index, Containers containers) {
  static std::atomic<int> next_ip{2};
  const int host = next_ip++ % 250 + 2;
  json& status = pod["status"];
  const std::string now = now_rfc3339();
  status["hostIP"] = node_ip(node_index);
  status["podIP"] = pod_subnet(node_index) + "." + std::to_string(host);
  status["podIPs"] = json::array({{{"ip", status["podIP"]}}});
  status["startTime"] = now;
  const bool running = containers == Containers::kRunAtOnce;
  status["phase"] = running ? "Running" : "Pending";
  const std::string ready = running ? "True" : "False";
  const std::string why = running ? "" : "ContainersNotReady";
  status["conditions"] =
      json::array({pod_condition("PodReadyToStartContainers", "True"), pod_condition("Initialized", "True"),
                   pod_condition("Ready", ready, why), pod_condition("ContainersReady", ready, why),
                   pod_condition("PodScheduled", "True")});
  json statuses = json::array();
  for (const json& c : pod["spec"].value("containers", json::array())) {
    statuses.push_back(container_status(c, running ? "sha256:" + std::string(64, '0') : "", running, now));
  }
  status["containerStatuses"] = statuses;
}

bool apply_progress(json& pod, const std::optional<Waiting>& waiting,
                    const std::map<std::string, std::string>& image_ids) {
  json& status = pod["status"];
  if (pod["metadata"].contains("deletionTimestamp") || status.value("phase", "") != "Pending") return false;
  const std::string now = now_rfc3339();
  for (json& c : status["containerStatuses"]) {
    const std::string name = c.value("name", "");
    if (waiting) {
      if (!waiting->container.empty() && waiting->container != name) continue;
      c["state"] = {{"waiting", {{"reason", waiting->reason}}}};
      if (!waiting->message.empty()) c["state"]["waiting"]["message"] = waiting->message;
      continue;
    }
    const auto id = image_ids.find(name);
    c["imageID"] = id == image_ids.end() || id->second.empty() ? "sha256:" + std::string(64, '0') : id->second;
    c["containerID"] = container_id();
    c["ready"] = c["started"] = true;
    c["state"] = {{"running", {{"startedAt", now}}}};
  }
  if (waiting) return true;
  status["phase"] = "Running";
  for (json& cond : status["conditions"]) {
    if (cond["type"] == "Ready" || cond["type"] == "ContainersReady") {
      cond["status"] = "True";
      cond.erase("reason");
      cond["lastTransitionTime"] = now;
    }
  }
  return true;
}

}  // namespace torus::standin

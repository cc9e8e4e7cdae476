#include "operator/controller/worker_security.h"

#include <string>

#include "operator/controller/children.h"
#include "operator/controller/labels.h"

namespace torus::controller {
namespace {

constexpr const char* kTmpVolume = "torus-tmp";

json pod_defaults() {
  return {{"runAsNonRoot", true},
          {"runAsUser", kWorkerUser},
          {"runAsGroup", kWorkerUser},
          {"fsGroup", kWorkerUser},
          {"fsGroupChangePolicy", "OnRootMismatch"},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

json container_defaults() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

json* worker_container(json& spec) {
  for (json& c : spec["containers"]) {
    if (c.value("name", "") == kWorkerContainer) return &c;
  }
  return nullptr;
}

bool mounts_at(const json& container, const std::string& path) {
  for (const json& m : container.value("volumeMounts", json::array())) {
    if (m.is_object() && m.value("mountPath", "") == path) return true;
  }
  return false;
}

void tolerate_gpu_taint(json& spec) {
  json& tolerations = spec["tolerations"];
  if (!tolerations.is_array()) tolerations = json::array();
  for (const json& t : tolerations) {
    const bool all_keys = t.value("key", "").empty() && t.value("operator", "") == "Exists";
    const bool gpu = t.value("key", "") == "nvidia.com/gpu" && t.value("operator", "Equal") == "Exists";
    const std::string effect = t.value("effect", "");
    if ((all_keys || gpu) && (effect.empty() || effect == "NoSchedule")) return;
  }
  tolerations.push_back({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
}

}  // namespace

void apply_worker_security(const api::TrainingJob& job, json& pod) {
  json& spec = pod["spec"];
  spec["securityContext"] = merge_objects(pod_defaults(), spec.value("securityContext", json::object()));
  json* worker = worker_container(spec);
  if (worker == nullptr) return;
  (*worker)["securityContext"] = merge_objects(container_defaults(), worker->value("securityContext", json::object()));
  if (!mounts_at(*worker, "/tmp")) {
    (*worker)["volumeMounts"].push_back({{"name", kTmpVolume}, {"mountPath", "/tmp"}});
    spec["volumes"].push_back({{"name", kTmpVolume}, {"emptyDir", json::object()}});
  }
  if (job.spec.gang.device == api::Device::kGpu) tolerate_gpu_taint(spec);
}

}  // namespace torus::controller

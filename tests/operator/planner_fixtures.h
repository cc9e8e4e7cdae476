#pragma once
// Fluent fixtures for planner tests: a TrainingJob as the API server stores it, and pods as a kubelet reports them.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "operator/controller/children.h"
#include "operator/controller/labels.h"
#include "operator/controller/planner.h"
#include "operator/controller/time_util.h"

namespace torus::controller::testing {

using json = nlohmann::json;
inline const TimePoint kT0 = TimePoint(std::chrono::seconds(1'800'000'000));
inline TimePoint at(int seconds) { return kT0 + std::chrono::seconds(seconds); }

class JobBuilder {
 public:
  explicit JobBuilder(std::string name = "mnist") {
    job_ = {{"apiVersion", "torus.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata",
             {{"name", name},
              {"namespace", "team"},
              {"uid", "uid-" + name},
              {"generation", 1},
              {"resourceVersion", "7"},
              {"creationTimestamp", format_time(kT0)}}},
            {"spec",
             {{"gang", {{"workers", 2}, {"processesPerWorker", 1}, {"device", "cpu"}}},
              {"model", {{"arch", "resnet9"}}},
              {"data", {{"dataset", "synthetic"}}},
              {"training",
               {{"epochs", 1},
                {"batchSize", 64},
                {"lrSchedule", {{"type", "one-cycle"}, {"peak", 0.1}}},
                {"checkpoint", {{"dir", "/ckpt"}}}}},
              {"runPolicy", {{"restartPolicy", "ExitCode"}, {"backoffLimit", 2}}}}}};
    job_["spec"]["gang"]["template"] = checkpoint_template();
  }
  // The worker container mounts a hostPath at /ckpt: checkpoints on storage that outlives pods, which the operator
  // requires of a job that restarts (checkpoint_storage.h).
  static json checkpoint_template() {
    return {{"spec",
             {{"containers",
               json::array({{{"name", "worker"}, {"volumeMounts", {{{"name", "ckpt"}, {"mountPath", "/ckpt"}}}}}})},
              {"volumes", json::array({{{"name", "ckpt"}, {"hostPath", {{"path", "/var/lib/torus/ckpt"}}}}})}}}};
  }
  JobBuilder& workers(int n) { return spec("gang", "workers", n); }
  JobBuilder& epochs(int n) { return spec("training", "epochs", n); }
  JobBuilder& generation(int g) {
    job_["metadata"]["generation"] = g;
    return *this;
  }
  JobBuilder& gpus(int per_worker) {
    job_["spec"]["gang"]["device"] = "gpu";
    job_["spec"]["gang"]["processesPerWorker"] = per_worker;
    return *this;
  }
  JobBuilder& restart_policy(const std::string& p) { return spec("runPolicy", "restartPolicy", p); }
  JobBuilder& backoff_limit(int n) { return spec("runPolicy", "backoffLimit", n); }
  JobBuilder& active_deadline(int s) { return spec("runPolicy", "activeDeadlineSeconds", s); }
  JobBuilder& running_deadline(int s) { return spec("runPolicy", "runningDeadlineSeconds", s); }
  JobBuilder& ttl(int s) { return spec("runPolicy", "ttlSecondsAfterFinished", s); }
  JobBuilder& clean_pod_policy(const std::string& p) { return spec("runPolicy", "cleanPodPolicy", p); }
  JobBuilder& suspend(bool s) { return spec("runPolicy", "suspend", s); }
  JobBuilder& managed_by(const std::string& m) { return spec("runPolicy", "managedBy", m); }
  JobBuilder& topology(const std::string& key, const std::string& placement) {
    job_["spec"]["runPolicy"]["topology"] = {{"key", key}, {"placement", placement}};
    return *this;
  }
  JobBuilder& scheduler(const std::string& name, const std::string& group) {
    job_["spec"]["runPolicy"]["schedulingPolicy"] = {{"schedulerName", name}, {"podGroup", group}};
    return *this;
  }
  JobBuilder& scheduling(const json& policy) {
    job_["spec"]["runPolicy"]["schedulingPolicy"] = policy;
    return *this;
  }
  // Merged over checkpoint_template().
  JobBuilder& pod_template(const json& t) {
    job_["spec"]["gang"]["template"] = merge_objects(checkpoint_template(), t);
    return *this;
  }
  JobBuilder& deleting() {
    job_["metadata"]["deletionTimestamp"] = format_time(kT0);
    return *this;
  }
  // Status as an earlier pass left it.
  JobBuilder& phase(const std::string& ph, int attempt = 0, int started_at = 0) {
    job_["status"]["phase"] = ph;
    job_["status"]["attempt"] = attempt;
    job_["status"]["restarts"] = attempt;
    job_["status"]["startTime"] = format_time(at(started_at));
    job_["status"]["observedGeneration"] = 1;
    return *this;
  }
  JobBuilder& condition(const std::string& type, const std::string& status, int since) {
    job_["status"]["conditions"].push_back(
        {{"type", type}, {"status", status}, {"reason", "Test"}, {"lastTransitionTime", format_time(at(since))}});
    return *this;
  }
  JobBuilder& completed_at(int s) {
    job_["status"]["completionTime"] = format_time(at(s));
    return *this;
  }
  json build() const { return job_; }

 private:
  template <typename V>
  JobBuilder& spec(const char* section, const char* key, V v) {
    job_["spec"][section][key] = v;
    return *this;
  }
  json job_;
};

class PodBuilder {
 public:
  PodBuilder(const std::string& job, int index, int attempt = 0) {
    pod_ = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", worker_pod_name(job, index)},
              {"namespace", "team"},
              {"creationTimestamp", format_time(kT0)},
              {"labels",
               {{std::string(kLabelJobName), job},
                {std::string(kLabelAttempt), std::to_string(attempt)},
                {std::string(kLabelWorkerIndex), std::to_string(index)}}}}},
            {"spec", json::object()},
            {"status", {{"phase", "Pending"}}}};
  }
  PodBuilder& running(const std::string& node = "node-0") {
    pod_["spec"]["nodeName"] = node;
    pod_["status"]["phase"] = "Running";
    pod_["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
    return *this;
  }
  PodBuilder& exited(int code, const std::string& reason = "") {
    pod_["status"]["phase"] = code == 0 ? "Succeeded" : "Failed";
    pod_["status"]["containerStatuses"] = {
        {{"name", "worker"}, {"state", {{"terminated", {{"exitCode", code}, {"reason", reason}}}}}}};
    return *this;
  }
  // Bound, its worker container waiting as the kubelet reports it (ImagePullBackOff, CreateContainerConfigError...).
  PodBuilder& waiting(const std::string& reason, const std::string& message) {
    pod_["spec"]["nodeName"] = "node-0";
    pod_["status"]["containerStatuses"] = {
        {{"name", "worker"}, {"state", {{"waiting", {{"reason", reason}, {"message", message}}}}}}};
    return *this;
  }
  PodBuilder& unschedulable(const std::string& message) {
    pod_["status"]["conditions"] = {
        {{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}, {"message", message}}};
    return *this;
  }
  // The DisruptionTarget condition Kubernetes adds before it evicts (reason EvictionByEvictionAPI), preempts or
  // drains the pod, since `since`.
  PodBuilder& disrupted(int since, const std::string& reason = "EvictionByEvictionAPI",
                        const std::string& message = "Eviction API: evicting") {
    pod_["status"]["conditions"].push_back({{"type", "DisruptionTarget"},
                                            {"status", "True"},
                                            {"reason", reason},
                                            {"message", message},
                                            {"lastTransitionTime", format_time(at(since))}});
    return *this;
  }
  // The worker container's finishedAt (after exited()).
  PodBuilder& finished_at(int s) {
    pod_["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = format_time(at(s));
    return *this;
  }
  // The controller owner reference of the job `job` (uid "uid-<job>", as JobBuilder makes it).
  PodBuilder& owned_by(const std::string& job) {
    pod_["metadata"]["ownerReferences"] = {{{"apiVersion", "torus.dev/v1alpha1"},
                                            {"kind", "TrainingJob"},
                                            {"name", job},
                                            {"uid", "uid-" + job},
                                            {"controller", true}}};
    return *this;
  }
  PodBuilder& terminating() {
    pod_["metadata"]["deletionTimestamp"] = format_time(kT0);
    return *this;
  }
  PodBuilder& annotate(const std::string& key, const std::string& value) {
    pod_["metadata"]["annotations"][key] = value;
    return *this;
  }
  PodBuilder& created_at(int s) {
    pod_["metadata"]["creationTimestamp"] = format_time(at(s));
    return *this;
  }
  json build() const { return pod_; }

 private:
  json pod_;
};

// A Node as the operator's node cache holds it: name and labels.
class NodeBuilder {
 public:
  explicit NodeBuilder(const std::string& name) {
    node_ = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", json::object()}}}};
  }
  NodeBuilder& label(const std::string& key, const std::string& value) {
    node_["metadata"]["labels"][key] = value;
    return *this;
  }
  json build() const { return node_; }

 private:
  json node_;
};

// The job as the planner sees it (decoded, defaulted), and the fingerprint of its spec that its pods carry.
inline api::TrainingJob defaulted(const json& job) { return api::with_defaults(api::decode_json(job).job); }
inline std::string spec_hash_of(const json& job) { return spec_hash(defaulted(job)); }

// The reason of the job's condition `type` when it is True in the plan's new status, else "<none>".
inline std::string condition_reason(const Plan& p, const std::string& type) {
  if (!p.status) return "<none>";
  for (const auto& c : p.status->value("conditions", json::array())) {
    if (c["type"] == type && c["status"] == "True") return c.value("reason", "");
  }
  return "<none>";
}

// A pod's worker environment: values, or "<fieldPath>" for downward API references.
inline std::map<std::string, std::string> env_of(const json& pod) {
  std::map<std::string, std::string> env;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    env[e["name"]] = e.contains("value") ? e["value"].get<std::string>()
                                         : "<" + e["valueFrom"]["fieldRef"]["fieldPath"].get<std::string>() + ">";
  }
  return env;
}

// The pods a plan creates and deletes, by name.
inline std::vector<std::string> created_pods(const Plan& p) {
  std::vector<std::string> names;
  for (const auto& c : p.creates) {
    if (c.kind == ChildKind::kPod) names.push_back(c.object["metadata"]["name"]);
  }
  return names;
}

inline std::vector<std::string> deleted_pods(const Plan& p) {
  std::vector<std::string> names;
  for (const auto& d : p.deletes) {
    if (d.kind == ChildKind::kPod) names.push_back(d.name);
  }
  return names;
}

// The phase after the pass: the new status's, else the job's as it was.
inline std::string phase_of(const Plan& p, const PlanInput& in) {
  if (p.status) return p.status->value("phase", "");
  return in.job.contains("status") ? in.job["status"].value("phase", "<none>") : "<none>";
}

// The shared children of a job (service, config map, secret) as if they exist.
inline PlanInput with_children(json job, std::vector<json> pods, TimePoint now) {
  std::string name = job["metadata"]["name"];
  auto named = [](const std::string& n) { return json{{"metadata", {{"name", n}, {"namespace", "team"}}}}; };
  return PlanInput{std::move(job),
                   objects_of(std::move(pods)),
                   objects_of({named(service_name(name))}),
                   objects_of({named(config_map_name(name))}),
                   objects_of({named(secret_name(name))}),
                   now,
                   "s3cret"};
}

}  // namespace torus::controller::testing

#include "operator/controller/children.h"

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "common/api/resolve.h"
#include "operator/controller/checkpoint_storage.h"
#include "operator/controller/labels.h"
#include "operator/controller/spec_edits.h"
#include "operator/controller/termination_grace.h"
#include "operator/controller/worker_security.h"

namespace torus::controller {
namespace {

json env_var(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }

json field_env(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

json metadata(const api::TrainingJob& job, const std::string& name, int attempt) {
  return {{"name", name},
          {"namespace", job.metadata.namespace_},
          {"labels", child_labels(job, attempt)},
          {"ownerReferences", json::array({owner_reference(job)})}};
}

// The ConfigMap and the pods say which spec they were made from (spec_edits.h).
json spec_annotations(const api::TrainingJob& job, const std::string& hash) {
  return {{str(kAnnotationSpecHash), hash},
          {str(kAnnotationGeneration), std::to_string(job.metadata.generation.value_or(0))}};
}

// Lists of named items (containers, env, volumes, ports...) merge item by item, keyed by "name".
bool is_named_list(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& item : v) {
    if (!item.is_object() || !item.contains("name")) return false;
  }
  return true;
}

// The launch contract's one writer renders the rank environment; the downward API fills in node and pod IP.
json rank_env(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks) {
  json env = json::array();
  for (const launch::EnvVar& v : launch::to_env(pod_rank_env(job, index, attempt, blocks), launch::Target::kPod)) {
    env.push_back(v.field_path.empty() ? env_var(v.name, v.value) : field_env(v.name, v.field_path));
  }
  return env;
}

json worker_resources(const api::TrainingJob& job) {
  json res = job.spec.gang.resources.is_object() ? job.spec.gang.resources : json::object();
  if (job.spec.gang.device == api::Device::kGpu) {
    std::string gpus = std::to_string(job.spec.gang.processes_per_worker.value_or(1));
    res["limits"]["nvidia.com/gpu"] = gpus;
    res["requests"]["nvidia.com/gpu"] = gpus;
  }
  return res;
}

json job_selector(const api::TrainingJob& job) { return {{"matchLabels", {{str(kLabelJobName), job.metadata.name}}}}; }

// Pod (anti-)affinity: one pod per node for whole-node GPU workers, the gang inside one topology block.
json affinity(const api::TrainingJob& job) {
  json aff = json::object();
  const auto& gang = job.spec.gang;
  if (gang.device == api::Device::kGpu && gang.processes_per_worker.value_or(1) >= kWholeNodeGpus) {
    aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].push_back(
        {{"labelSelector", job_selector(job)}, {"topologyKey", "kubernetes.io/hostname"}});
  }
  const auto& topo = job.spec.run_policy.topology;
  if (topo.key.empty()) return aff;
  json term = {{"labelSelector", job_selector(job)}, {"topologyKey", topo.key}};
  auto placement = topo.placement.value_or(api::TopologyPlacement::kPreferred);
  if (placement == api::TopologyPlacement::kPreferred) {
    aff["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].push_back(
        {{"weight", 100}, {"podAffinityTerm", term}});
  } else {
    aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].push_back(term);
  }
  if (placement == api::TopologyPlacement::kExclusive) {
    // The block belongs to this gang: no other Torus job's workers share it.
    json others = {{"matchExpressions",
                    json::array({{{"key", str(kLabelJobName)}, {"operator", "NotIn"}, {"values", {job.metadata.name}}},
                                 {{"key", str(kLabelJobName)}, {"operator", "Exists"}}})}};
    aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].push_back(
        {{"labelSelector", others}, {"topologyKey", topo.key}});
  }
  return aff;
}

// The rendezvous port, and one named metrics port per local rank (local rank k serves metricsPort + k): "metrics",
// "metrics-1", ... so the Service and the chart's PodMonitor reach every rank of a multi-process pod.
json worker_ports(const api::TrainingJob& job, const char* number_key) {
  json ports = {{{"name", "rendezvous"}, {number_key, job.spec.rendezvous_port.value_or(api::kDefaultRendezvousPort)}}};
  const int metrics = job.spec.metrics_port.value_or(api::kDefaultMetricsPort);
  for (int k = 0; k < job.spec.gang.processes_per_worker.value_or(1); ++k) {
    ports.push_back({{"name", metrics_port_name(k)}, {number_key, metrics + k}});
  }
  return ports;
}

// Pods of several processes share memory between their ranks (NCCL's and the CPU all-reduce's shared-memory
// transports): /dev/shm is a memory-backed emptyDir instead of the runtime's default 64 MiB.
// A user who mounts something at /dev/shm in the worker's template keeps it (two mounts at one path are refused).
bool user_mounts_shm(const api::TrainingJob& job) {
  const json& t = job.spec.gang.pod_template;
  if (!t.is_object() || !t.contains("spec") || !t["spec"].is_object()) return false;
  for (const json& c : t["spec"].value("containers", json::array())) {
    if (!c.is_object() || c.value("name", "") != kWorkerContainer) continue;
    for (const json& m : c.value("volumeMounts", json::array())) {
      if (m.is_object() && m.value("mountPath", "") == "/dev/shm") return true;
    }
  }
  return false;
}

bool shares_memory(const api::TrainingJob& job) {
  return job.spec.gang.processes_per_worker.value_or(1) > 1 && !user_mounts_shm(job);
}

std::string shm_size(const api::TrainingJob& job) {
  const int per_rank_mib = job.spec.gang.device == api::Device::kGpu ? 1024 : 256;
  return std::to_string(per_rank_mib * job.spec.gang.processes_per_worker.value_or(1)) + "Mi";
}

json worker_container(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks) {
  json mounts = {{{"name", "torus-job"}, {"mountPath", str(kJobFileDir)}, {"readOnly", true}},
                 {{"name", "torus-rendezvous"}, {"mountPath", str(kSecretDir)}, {"readOnly", true}}};
  if (shares_memory(job)) mounts.push_back({{"name", str(kShmVolume)}, {"mountPath", "/dev/shm"}});
  return {{"name", str(kWorkerContainer)},
          {"image", job.spec.gang.image},
          {"command", {"torus-worker"}},
          {"env", rank_env(job, index, attempt, blocks)},
          {"resources", worker_resources(job)},
          {"ports", worker_ports(job, "containerPort")},
          {"volumeMounts", mounts}};
}

json worker_volumes(const api::TrainingJob& job) {
  const std::string& name = job.metadata.name;
  json volumes = {{{"name", "torus-job"}, {"configMap", {{"name", config_map_name(name)}}}},
                  {{"name", "torus-rendezvous"}, {"secret", {{"secretName", secret_name(name)}}}}};
  if (shares_memory(job)) {
    volumes.push_back({{"name", str(kShmVolume)}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", shm_size(job)}}}});
  }
  return volumes;
}

}  // namespace

launch::RankEnv pod_rank_env(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks) {
  const int ppw = job.spec.gang.processes_per_worker.value_or(1);
  launch::RankEnv e;
  e.job_name = job.metadata.name;
  e.ns = job.metadata.namespace_;
  e.attempt = attempt;
  e.world_size = api::world_size(job.spec);
  e.job_file = str(kJobFileDir) + "/" + str(kJobFileName);
  e.master_addr = master_address(job);
  e.master_port = job.spec.rendezvous_port.value_or(api::kDefaultRendezvousPort);
  e.secret_file = str(kSecretDir) + "/" + str(kSecretKey);
  // A single-process pod is exactly one rank; a pod of several starts its local ranks itself (torus-worker).
  e.launch = ppw == 1 ? launch::Launch::kRank : launch::Launch::kLocalRanks;
  e.node_rank = index;
  e.rank = index * ppw;
  e.local_world_size = ppw;
  e.metrics_port = job.spec.metrics_port.value_or(api::kDefaultMetricsPort);
  // The job is the run (common/launch/checkpoint_layout.h): its attempts resume its own checkpoints, a new job of the
  // same name does not.
  e.run_id = run_of(job);
  // A checkpoint was written (status.lastCheckpoint): the attempt must resume from it, never silently from step 0.
  if (!job.status.last_checkpoint.path.empty()) e.resume_step = job.status.last_checkpoint.step;
  // The worker looks its node (TORUS_NODE_NAME) up in the map: pods cannot read their node's labels.
  if (blocks.ordering == RackOrdering::kMounted) {
    e.topology_key = job.spec.run_policy.topology.key;
    e.topology_blocks_file = str(kJobFileDir) + "/" + str(kBlocksFileName);
  }
  return e;
}

json owner_reference(const api::TrainingJob& job) {
  return {{"apiVersion", str(api::kApiVersion)},
          {"kind", str(api::kKind)},
          {"name", job.metadata.name},
          {"uid", job.metadata.uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

json child_labels(const api::TrainingJob& job, int attempt) {
  return {{str(kLabelManagedBy), str(kManagedByValue)},
          {str(kLabelJobName), job.metadata.name},
          {str(kLabelAttempt), std::to_string(attempt)}};
}

std::string spec_hash(const api::TrainingJob& job) { return attempt_spec_hash(api::to_json(job)["spec"]); }

std::string master_address(const api::TrainingJob& job) {
  return worker_pod_name(job.metadata.name, 0) + "." + service_name(job.metadata.name) + "." + job.metadata.namespace_ +
         ".svc";
}

json build_service(const api::TrainingJob& job, int attempt) {
  json svc = {
      {"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", metadata(job, service_name(job.metadata.name), attempt)}};
  svc["spec"] = {{"clusterIP", "None"},
                 // Rank 0 must resolve before it is Ready: the rendezvous happens before readiness.
                 {"publishNotReadyAddresses", true},
                 {"selector", {{str(kLabelJobName), job.metadata.name}, {str(kLabelRole), "worker"}}},
                 {"ports", worker_ports(job, "port")}};
  return svc;
}

json build_config_map(const api::TrainingJob& job, int attempt, const BlocksPlan& blocks) {
  return build_config_map(job, attempt, blocks, spec_hash(job));
}

json build_config_map(const api::TrainingJob& job, int attempt, const BlocksPlan& blocks, const std::string& hash) {
  json spec_doc = api::to_json(job);
  spec_doc.erase("status");
  json data = {{str(kJobFileName), spec_doc.dump(2)}};
  if (blocks.ordering == RackOrdering::kMounted) data[str(kBlocksFileName)] = blocks.text;
  json md = metadata(job, config_map_name(job.metadata.name), attempt);
  md["annotations"] = spec_annotations(job, hash);
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", md}, {"data", data}};
}

json build_secret(const api::TrainingJob& job, int attempt, const std::string& secret) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", metadata(job, secret_name(job.metadata.name), attempt)},
          {"type", "Opaque"},
          {"stringData", {{str(kSecretKey), secret}}}};
}

std::optional<json> build_pod_group(const api::TrainingJob& job, int attempt) {
  const auto& sched = job.spec.run_policy.scheduling_policy;
  if (sched.scheduler_name.empty() || !sched.pod_group.empty()) return std::nullopt;
  const int32_t min_member = sched.min_available.value_or(job.spec.gang.workers.value_or(1));
  json group = {{"kind", "PodGroup"},
                {"metadata", metadata(job, job.metadata.name, attempt)},
                {"spec", {{"minMember", min_member}}}};
  if (sched.scheduler_name == kVolcanoScheduler) {
    group["apiVersion"] = "scheduling.volcano.sh/v1beta1";
    if (!sched.queue.empty()) group["spec"]["queue"] = sched.queue;
    if (!sched.priority_class.empty()) group["spec"]["priorityClassName"] = sched.priority_class;
  } else {
    group["apiVersion"] = "scheduling.x-k8s.io/v1alpha1";
  }
  return group;
}

json build_worker_pod(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks) {
  return build_worker_pod(job, index, attempt, blocks, spec_hash(job));
}

json build_worker_pod(const api::TrainingJob& job, int index, int attempt, const BlocksPlan& blocks,
                      const std::string& hash) {
  const std::string& name = job.metadata.name;
  json user = job.spec.gang.pod_template.is_object() ? job.spec.gang.pod_template : json::object();
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] =
      merge_objects(user.value("metadata", json::object()), metadata(job, worker_pod_name(name, index), attempt));
  pod["metadata"]["labels"][str(kLabelWorkerIndex)] = std::to_string(index);
  pod["metadata"]["labels"][str(kLabelRole)] = "worker";
  pod["metadata"]["annotations"] =
      merge_objects(pod["metadata"].value("annotations", json::object()), spec_annotations(job, hash));
  pod["metadata"]["annotations"][str(kAnnotationTerminationGrace)] = describe_grace(job);
  json ours = {{"restartPolicy", "Never"},  // the operator restarts the gang, never a single container
               {"hostname", worker_pod_name(name, index)},
               {"subdomain", service_name(name)},
               {"containers", json::array({worker_container(job, index, attempt, blocks)})},
               {"volumes", worker_volumes(job)}};
  // Long enough for every rank to finish its step and rank 0 to save it after a SIGTERM (termination_grace.h);
  // fixed for the pod's life (Kubernetes refuses to change it on a running pod), so a slower save measured during
  // this attempt lengthens the next attempt's. A user's value in the template is kept as written.
  if (!user_termination_grace(job)) ours["terminationGracePeriodSeconds"] = termination_grace_for(job);
  json aff = affinity(job);
  if (!aff.empty()) ours["affinity"] = aff;
  const auto& sched = job.spec.run_policy.scheduling_policy;
  if (!sched.scheduler_name.empty()) ours["schedulerName"] = sched.scheduler_name;
  if (!sched.priority_class.empty()) ours["priorityClassName"] = sched.priority_class;
  if (!sched.scheduler_name.empty() || !sched.pod_group.empty()) {
    std::string group = sched.pod_group.empty() ? name : sched.pod_group;
    pod["metadata"]["labels"][str(kLabelPodGroup)] = group;
    pod["metadata"]["annotations"][str(kAnnotationVolcanoGroup)] = group;
  }
  // The user's template fills in everything else (node selectors, tolerations, volumes, env...); for the fields
  // the gang contract depends on, ours win.
  pod["spec"] = merge_objects(user.value("spec", json::object()), ours);
  mount_checkpoint_claim(job, index, pod["spec"]);
  apply_worker_security(job, pod);
  return pod;
}

json merge_objects(const json& base, const json& overlay) {
  if (base.is_object() && overlay.is_object()) {
    json out = base;
    for (auto it = overlay.begin(); it != overlay.end(); ++it) {
      if (it.value().is_null()) {
        out.erase(it.key());  // RFC 7386: null removes (a template's `fsGroup: null` drops the default)
      } else {
        out[it.key()] = out.contains(it.key()) ? merge_objects(out[it.key()], it.value()) : it.value();
      }
    }
    return out;
  }
  if (is_named_list(base) && is_named_list(overlay)) {
    json out = base;
    for (const auto& item : overlay) {
      bool merged = false;
      for (auto& existing : out) {
        if (existing["name"] == item["name"]) {
          existing = merge_objects(existing, item);
          merged = true;
          break;
        }
      }
      if (!merged) out.push_back(item);
    }
    return out;
  }
  return overlay;
}

}  // namespace torus::controller

#include "tests/apiserver/workload_controllers.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/log/log.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/object_rules.h"

namespace torus::standin {
namespace {

constexpr const char* kHashLabel = "pod-template-hash";

// object[key] when it is an object, else an empty one (a field that is absent or null).
const json& part(const json& object, const char* key) {
  static const json empty = json::object();
  auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : empty;
}
constexpr const char* kRevision = "deployment.kubernetes.io/revision";

WriteOptions as_controller_manager() {
  WriteOptions options;
  options.field_manager = "kube-controller-manager";
  return options;
}

bool controlled_by(const json& object, const std::string& uid) {
  for (const json& ref : part(object, "metadata").value("ownerReferences", json::array())) {
    if (ref.value("controller", false) && ref.value("uid", "") == uid) return true;
  }
  return false;
}

bool terminating(const json& object) { return part(object, "metadata").contains("deletionTimestamp"); }

bool pod_ready(const json& pod) {
  for (const json& c : part(pod, "status").value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

bool pod_active(const json& pod) {
  const std::string phase = part(pod, "status").value("phase", "");
  return !terminating(pod) && phase != "Succeeded" && phase != "Failed";
}

int64_t replicas_of(const json& object) { return part(object, "spec").value("replicas", int64_t{1}); }

int64_t status_count(const json& object, const char* field) {
  return part(object, "status").value(field, int64_t{0});
}

// maxSurge / maxUnavailable: an integer, or a percentage of the desired replicas rounded up (surge) or down.
int64_t int_or_percent(const json& value, int64_t total, bool round_up) {
  if (value.is_number_integer()) return value.get<int64_t>();
  const std::string text = value.is_string() ? value.get<std::string>() : "25%";
  const double share = std::stod(text.substr(0, text.find('%'))) / 100.0 * static_cast<double>(total);
  return static_cast<int64_t>(round_up ? std::ceil(share) : std::floor(share));
}

json owner_reference(const json& owner) {
  return {{"apiVersion", owner.value("apiVersion", "apps/v1")},
          {"kind", owner.value("kind", "")},
          {"name", owner["metadata"].value("name", "")},
          {"uid", owner["metadata"].value("uid", "")},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

std::vector<json> controlled(const std::vector<ObjectPtr>& objects, const std::string& uid) {
  std::vector<json> out;
  for (const ObjectPtr& o : objects) {
    if (controlled_by(*o, uid) && !terminating(*o)) out.push_back(*o);
  }
  return out;
}

json condition(const std::string& type, bool status, const std::string& reason, const std::string& message) {
  return {{"type", type}, {"status", status ? "True" : "False"}, {"reason", reason}, {"message", message}};
}

// Keeps a condition's transition time while its status stays, as controllers do.
json with_times(json conditions, const json& before) {
  for (json& c : conditions) {
    std::string time = now_rfc3339();
    for (const json& old : before) {
      if (old.value("type", "") == c["type"] && old.value("status", "") == c["status"]) {
        time = old.value("lastTransitionTime", time);
      }
    }
    c["lastTransitionTime"] = time;
  }
  return conditions;
}

}  // namespace

std::string pod_template_hash(const json& pod_template) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : pod_template.dump()) hash = (hash ^ c) * 16777619u;
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (char digit : std::to_string(hash)) out += alphabet[static_cast<unsigned char>(digit) % alphabet.size()];
  return out;
}

WorkloadControllers::WorkloadControllers(Store& store)
    : store_(store),
      deployments_(*store.registry().find("apps", "v1", "deployments")),
      replica_sets_(*store.registry().find("apps", "v1", "replicasets")),
      pods_(*store.registry().find("", "v1", "pods")),
      thread_([this] { run(); }) {}

WorkloadControllers::~WorkloadControllers() {
  stopping_ = true;
  {
    std::lock_guard lock(mutex_);
    for (WatchStream* s : streams_) s->cancel();
  }
  if (thread_.joinable()) thread_.join();
}

void WorkloadControllers::run() {
  while (!stopping_) {
    std::vector<std::unique_ptr<WatchStream>> streams;
    for (const ResourceType* type : {&deployments_, &replica_sets_, &pods_}) {
      WatchRequest request;
      request.type = store_.registry().find(type->group, type->version, type->plural);
      streams.push_back(store_.watch(request));
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      for (const auto& s : streams) streams_.push_back(s.get());
    }
    const Watching outcome = watch_and_reconcile(streams);
    {
      // Unregistered before they are destroyed: the destructor cancels only live streams.
      std::lock_guard lock(mutex_);
      streams_.clear();
    }
    if (outcome == Watching::kClosed) return;
  }
}

WorkloadControllers::Watching WorkloadControllers::watch_and_reconcile(
    const std::vector<std::unique_ptr<WatchStream>>& streams) {
  bool dirty = true;
  std::vector<WatchEvent> events;
  while (!stopping_) {
    // Wait on the first stream (any store change wakes it), then take what the others have without waiting.
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto wait = i == 0 && !dirty ? std::chrono::milliseconds(200) : std::chrono::milliseconds(0);
      const WatchStream::Outcome outcome = streams[i]->next(std::chrono::steady_clock::now() + wait, events);
      if (outcome == WatchStream::Outcome::kClosed) return Watching::kClosed;
      if (outcome == WatchStream::Outcome::kDropped || outcome == WatchStream::Outcome::kExpired) {
        return Watching::kRewatch;  // like any client: watch again from the current state
      }
      dirty = dirty || outcome == WatchStream::Outcome::kEvents;
    }
    if (dirty && !stopping_) dirty = !reconcile_all();
  }
  return Watching::kClosed;
}

bool WorkloadControllers::reconcile_all() {
  try {
    const std::vector<ObjectPtr> deployments = store_.list(deployments_, "").items;
    std::vector<ObjectPtr> replica_sets = store_.list(replica_sets_, "").items;
    for (const ObjectPtr& d : deployments) {
      if (!terminating(*d)) reconcile_deployment(*d, replica_sets);
    }
    replica_sets = store_.list(replica_sets_, "").items;
    const std::vector<ObjectPtr> pods = store_.list(pods_, "").items;
    for (const ObjectPtr& rs : replica_sets) {
      if (!terminating(*rs)) reconcile_replica_set(*rs, pods);
    }
    return true;
  } catch (const ApiError& e) {
    // A write that lost a race (409) or an object gone (404): the next pass starts from what the store has then.
    TLOG(Debug) << "kube-controller-manager: " << e.what();
    return false;
  }
}

ObjectPtr WorkloadControllers::ensure_replica_set(const json& deployment, const std::string& hash,
                                                  const std::vector<ObjectPtr>& owned) {
  int64_t revision = 0;
  for (const ObjectPtr& rs : owned) {
    const json& meta = part(*rs, "metadata");
    if (part(meta, "labels").value(kHashLabel, "") == hash) return rs;
    revision = std::max<int64_t>(revision, std::stoll(part(meta, "annotations").value(kRevision, std::string("0"))));
  }
  json pod_template = part(part(deployment, "spec"), "template");
  pod_template["metadata"]["labels"][kHashLabel] = hash;
  json selector = part(part(deployment, "spec"), "selector");
  selector["matchLabels"][kHashLabel] = hash;
  const json& meta = deployment["metadata"];
  json replica_set = {
      {"apiVersion", "apps/v1"},
      {"kind", "ReplicaSet"},
      {"metadata",
       {{"name", meta.value("name", "") + "-" + hash},
        {"namespace", meta.value("namespace", "")},
        {"labels", pod_template["metadata"]["labels"]},
        {"annotations", {{kRevision, std::to_string(revision + 1)}}},
        {"ownerReferences", json::array({owner_reference(deployment)})}}},
      {"spec", {{"replicas", 0}, {"selector", selector}, {"template", pod_template}}}};
  return store_.create(replica_sets_, meta.value("namespace", ""), std::move(replica_set), as_controller_manager())
      .object;
}

void WorkloadControllers::reconcile_deployment(const json& deployment, const std::vector<ObjectPtr>& replica_sets) {
  const std::string uid = deployment["metadata"].value("uid", "");
  std::vector<ObjectPtr> owned;
  for (const ObjectPtr& rs : replica_sets) {
    if (controlled_by(*rs, uid) && !terminating(*rs)) owned.push_back(rs);
  }
  const json& spec = part(deployment, "spec");
  const std::string hash = pod_template_hash(part(spec, "template"));
  const json current = *ensure_replica_set(deployment, hash, owned);
  std::vector<json> old;
  for (const ObjectPtr& rs : owned) {
    if ((*rs)["metadata"].value("name", "") != current["metadata"].value("name", "")) old.push_back(*rs);
  }
  const int64_t desired = replicas_of(deployment);
  const json& strategy = part(spec, "strategy");
  const json& rolling = part(strategy, "rollingUpdate");
  int64_t surge = int_or_percent(rolling.value("maxSurge", json("25%")), desired, true);
  int64_t unavailable = int_or_percent(rolling.value("maxUnavailable", json("25%")), desired, false);
  if (surge == 0 && unavailable == 0) unavailable = 1;
  int64_t old_total = 0;
  int64_t old_pods = 0;
  for (const json& rs : old) {
    old_total += replicas_of(rs);
    old_pods += status_count(rs, "replicas");
  }
  if (strategy.value("type", "RollingUpdate") == "Recreate") {
    for (const json& rs : old) {
      if (replicas_of(rs) > 0) scale(rs, 0);
    }
    if (old_pods == 0 && replicas_of(current) != desired) scale(current, desired);
  } else {
    // Up to desired + maxSurge pods in all; the old ones go while at least desired - maxUnavailable are available.
    int64_t target = std::min(desired, std::max(replicas_of(current), desired + surge - old_total));
    if (target != replicas_of(current)) scale(current, target);
    int64_t available = status_count(current, "availableReplicas");
    for (const json& rs : old) available += status_count(rs, "availableReplicas");
    int64_t removable = std::max<int64_t>(0, available - (desired - unavailable));
    for (const json& rs : old) {
      const int64_t unhealthy = std::max<int64_t>(0, replicas_of(rs) - status_count(rs, "availableReplicas"));
      const int64_t remove = std::min(replicas_of(rs), unhealthy + removable);
      removable -= std::max<int64_t>(0, remove - unhealthy);
      if (remove > 0) scale(rs, replicas_of(rs) - remove);
    }
  }
  int64_t replicas = status_count(current, "replicas");
  int64_t ready = status_count(current, "readyReplicas");
  int64_t available = status_count(current, "availableReplicas");
  for (const json& rs : old) {
    replicas += status_count(rs, "replicas");
    ready += status_count(rs, "readyReplicas");
    available += status_count(rs, "availableReplicas");
  }
  const bool minimum = available >= desired - unavailable;
  const bool complete = status_count(current, "availableReplicas") == desired && old_pods == 0;
  const json before = part(deployment, "status").value("conditions", json::array());
  json status = {
      {"observedGeneration", deployment["metadata"].value("generation", int64_t{1})},
      {"replicas", replicas},
      {"updatedReplicas", status_count(current, "replicas")},
      {"readyReplicas", ready},
      {"availableReplicas", available},
      {"unavailableReplicas", std::max<int64_t>(0, desired - available)},
      {"conditions",
       with_times(json::array({condition("Available", minimum,
                                         minimum ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
                                         minimum ? "Deployment has minimum availability."
                                                 : "Deployment does not have minimum availability."),
                               condition("Progressing", true, complete ? "NewReplicaSetAvailable" : "ReplicaSetUpdated",
                                         "ReplicaSet \"" + current["metadata"].value("name", "") +
                                             (complete ? "\" has successfully progressed." : "\" is progressing."))}),
                  before)}};
  write_status(deployments_, deployment, status);
}

void WorkloadControllers::reconcile_replica_set(const json& replica_set, const std::vector<ObjectPtr>& pods) {
  std::vector<json> active;
  for (const json& pod : controlled(pods, replica_set["metadata"].value("uid", ""))) {
    if (pod_active(pod)) active.push_back(pod);
  }
  const int64_t desired = replicas_of(replica_set);
  const std::string ns = replica_set["metadata"].value("namespace", "");
  const json& pod_template = part(part(replica_set, "spec"), "template");
  for (int64_t i = static_cast<int64_t>(active.size()); i < desired; ++i) {
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"generateName", replica_set["metadata"].value("name", "") + "-"},
                  {"labels", part(part(pod_template, "metadata"), "labels")},
                  {"annotations", part(part(pod_template, "metadata"), "annotations")},
                  {"ownerReferences", json::array({owner_reference(replica_set)})}}},
                {"spec", pod_template.value("spec", json::object())}};
    store_.create(pods_, ns, std::move(pod), as_controller_manager());
  }
  if (static_cast<int64_t>(active.size()) > desired) {
    // The ones to lose first: not ready, then the newest.
    std::sort(active.begin(), active.end(), [](const json& a, const json& b) {
      if (pod_ready(a) != pod_ready(b)) return !pod_ready(a);
      return a["metadata"].value("creationTimestamp", "") > b["metadata"].value("creationTimestamp", "");
    });
    for (size_t i = 0; i < active.size() - static_cast<size_t>(desired); ++i) {
      store_.remove(pods_, ns, active[i]["metadata"].value("name", ""));
    }
  }
  int64_t ready = 0;
  for (const json& pod : active) ready += pod_ready(pod) ? 1 : 0;
  json status = {{"replicas", static_cast<int64_t>(active.size())},
                 {"fullyLabeledReplicas", static_cast<int64_t>(active.size())},
                 {"readyReplicas", ready},
                 {"availableReplicas", ready},
                 {"observedGeneration", replica_set["metadata"].value("generation", int64_t{1})}};
  write_status(replica_sets_, replica_set, status);
}

void WorkloadControllers::scale(const json& replica_set, int64_t replicas) {
  json changed = replica_set;
  changed["spec"]["replicas"] = replicas;
  const std::string ns = replica_set["metadata"].value("namespace", "");
  const std::string name = replica_set["metadata"].value("name", "");
  store_.update(replica_sets_, ns, name, std::move(changed), Subresource::kMain, as_controller_manager());
}

void WorkloadControllers::write_status(const ResourceType& type, const json& object, const json& status) {
  if (part(object, "status") == status) return;
  json changed = object;
  changed["status"] = status;
  store_.update(type, object["metadata"].value("namespace", ""), object["metadata"].value("name", ""),
                std::move(changed), Subresource::kStatus, as_controller_manager());
}

}  // namespace torus::standin

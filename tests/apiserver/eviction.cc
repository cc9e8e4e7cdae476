#include "tests/apiserver/eviction.h"

#include <optional>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/scheduling.h"

namespace torus::standin {
namespace {

// As client-go's retry.DefaultRetry for the eviction's own writes: a conflict means someone wrote first; read again.
constexpr int kConflictRetries = 20;

const json& member(const json& object, const char* key) {
  static const json kNull;
  auto it = object.is_object() ? object.find(key) : object.end();
  return it != object.end() ? *it : kNull;
}

std::string phase_of(const json& pod) { return member(pod, "status").value("phase", "Pending"); }
bool being_deleted(const json& pod) { return member(pod, "metadata").contains("deletionTimestamp"); }

bool pod_ready(const json& pod) {
  const json& conditions = member(member(pod, "status"), "conditions");
  if (!conditions.is_array()) return false;
  for (const json& c : conditions) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

// canIgnorePDB: a pod that cannot count towards a budget (not running, or already going) is deleted at once.
bool can_ignore_budget(const json& pod) {
  const std::string phase = phase_of(pod);
  return phase == "Succeeded" || phase == "Failed" || phase == "Pending" || being_deleted(pod);
}

// shouldEnforceResourceVersion: a pod that may still become ready is deleted only as it was read.
bool should_enforce_resource_version(const json& pod) {
  const std::string phase = phase_of(pod);
  return !(phase == "Succeeded" || phase == "Failed" || being_deleted(pod));
}

// The Eviction's deleteOptions, with the request's dryRun merged in as propagateDryRun does.
DeleteOptions delete_options_of(const json& eviction, DryRun request_dry_run) {
  DeleteOptions options;
  const json& d = member(eviction, "deleteOptions");
  if (!d.is_object()) {
    options.dry_run = request_dry_run;
    return options;
  }
  if (d.contains("gracePeriodSeconds") && d["gracePeriodSeconds"].is_number_integer()) {
    options.grace_period_seconds = d["gracePeriodSeconds"].get<int64_t>();
  }
  const json& pre = member(d, "preconditions");
  if (pre.is_object()) {
    options.precondition_uid = pre.value("uid", "");
    options.precondition_resource_version = pre.value("resourceVersion", "");
  }
  const std::string policy = d.value("propagationPolicy", "");
  if (policy == "Foreground") options.propagation = Propagation::kForeground;
  if (policy == "Orphan") options.propagation = Propagation::kOrphan;
  const json& dry = member(d, "dryRun");
  const bool body_dry_run = dry.is_array() && !dry.empty();
  const bool body_all = body_dry_run && dry.size() == 1 && dry[0] == "All";
  if (body_dry_run && !body_all)
    throw bad_request("dryRun: unsupported value " + dry.dump() + ": supported values: \"All\"");
  if (body_dry_run && request_dry_run == DryRun::kNo) {
    options.dry_run = DryRun::kAll;
  } else {
    options.dry_run = request_dry_run;
  }
  return options;
}

ApiError too_many_requests(const std::string& message, int retry_after, const std::string& cause) {
  StatusDetails details;
  details.retry_after_seconds = retry_after;
  details.causes.push_back({"DisruptionBudget", cause, ""});
  return ApiError(429, "TooManyRequests", message, details);
}

constexpr const char* kViolates = "Cannot evict pod as it would violate the pod's disruption budget.";

// createTooManyRequestsError: a budget the disruption controller has not caught up with.
ApiError still_processed(const std::string& budget) {
  return too_many_requests(kViolates, 10,
                           "The disruption budget " + budget + " is still being processed by the server.");
}

// The pod's status with the DisruptionTarget condition (UpdatePodCondition: a new condition, or a change of its
// status, takes the time now).
void add_disruption_condition(json& pod, const char* reason, const char* message) {
  json& status = pod["status"];
  if (!status.is_object()) status = json::object();
  json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json condition = {{"type", "DisruptionTarget"}, {"status", "True"},         {"reason", reason},
                    {"message", message},          {"lastProbeTime", nullptr}, {"lastTransitionTime", now_rfc3339()}};
  for (json& c : conditions) {
    if (c.value("type", "") != "DisruptionTarget") continue;
    if (c.value("status", "") == "True" && c.contains("lastTransitionTime")) {
      condition["lastTransitionTime"] = c["lastTransitionTime"];
    }
    c = condition;
    return;
  }
  conditions.push_back(condition);
}

std::string conflict_message(const std::string& name, const std::string& what) {
  return "Operation cannot be fulfilled on Pod \"" + name + "\": " + what;
}

// The budgets of the pod's namespace whose selector matches its labels (policy/v1: an empty selector matches every
// pod; a budget without one matches none).
std::vector<ObjectPtr> budgets_of(Store& store, const json& pod, const std::string& ns) {
  std::vector<ObjectPtr> out;
  const ResourcePtr type = store.registry().find("policy", "v1", "poddisruptionbudgets");
  if (!type) return out;
  const json labels = member(pod, "metadata").value("labels", json::object());
  for (const ObjectPtr& pdb : store.list(*type, ns).items) {
    const json& selector = member(member(*pdb, "spec"), "selector");
    if (!selector.is_object()) continue;
    if (label_selector_matches(selector, labels)) out.push_back(pdb);
  }
  return out;
}

// checkAndDecrement: whether the budget allows one more disruption; if so, it records this one in its status.
void check_and_decrement(Store& store, const std::string& ns, const std::string& pod_name, const std::string& budget,
                         bool dry_run) {
  const ResourceType& type = *store.registry().find("policy", "v1", "poddisruptionbudgets");
  for (int attempt = 0;; ++attempt) {
    json pdb = *store.get(type, ns, budget);
    const json& status = member(pdb, "status");
    const int64_t generation = member(pdb, "metadata").value("generation", int64_t{0});
    const int64_t observed = status.is_object() ? status.value("observedGeneration", int64_t{0}) : 0;
    if (!status.is_object() || observed < generation) throw still_processed(budget);
    const int64_t allowed = status.value("disruptionsAllowed", int64_t{0});
    if (allowed < 0) {
      throw ApiError(403, "Forbidden",
                     "poddisruptionbudget.policy \"" + budget + "\" is forbidden: pdb disruptions allowed is negative",
                     StatusDetails{budget, "policy", "poddisruptionbudget", {}, 0});
    }
    if (allowed == 0) {
      throw too_many_requests(kViolates, 0,
                              "The disruption budget " + budget + " needs " +
                                  std::to_string(status.value("desiredHealthy", 0)) + " healthy pods and has " +
                                  std::to_string(status.value("currentHealthy", 0)) + " currently");
    }
    if (dry_run) return;
    pdb["status"]["disruptionsAllowed"] = allowed - 1;
    pdb["status"]["disruptedPods"][pod_name] = now_rfc3339();
    try {
      store.update(type, ns, budget, std::move(pdb), Subresource::kStatus);
      return;
    } catch (const ApiError& e) {
      if (e.code() != 409 || attempt + 1 >= kConflictRetries) throw;
    }
  }
}

}  // namespace

// addConditionAndDeletePod: the condition on the latest pod (through the status, as the eviction's store is the
// pods' status store), honouring the preconditions, then the deletion.
void add_condition_and_delete(Store& store, const ResourceType& pods, const std::string& ns, const std::string& name,
                              DeleteOptions options, const char* reason, const char* message) {
  if (options.dry_run == DryRun::kNo) {
    for (int attempt = 0;; ++attempt) {
      json pod = *store.get(pods, ns, name);
      const json& meta = pod["metadata"];
      if (!options.precondition_uid.empty() && options.precondition_uid != meta.value("uid", "")) {
        throw ApiError(409, "Conflict",
                       conflict_message(name, "the UID in the precondition (" + options.precondition_uid +
                                                  ") does not match the UID in record (" + meta.value("uid", "") +
                                                  "). The object might have been deleted and then recreated"),
                       StatusDetails{name, "", "Pod", {}, 0});
      }
      if (!options.precondition_resource_version.empty() &&
          options.precondition_resource_version != meta.value("resourceVersion", "")) {
        throw ApiError(
            409, "Conflict",
            conflict_message(name, "the ResourceVersion in the precondition (" + options.precondition_resource_version +
                                       ") does not match the ResourceVersion in record (" +
                                       meta.value("resourceVersion", "") + "). The object might have been modified"),
            StatusDetails{name, "", "Pod", {}, 0});
      }
      add_disruption_condition(pod, reason, message);
      try {
        const WriteResult written = store.update(pods, ns, name, std::move(pod), Subresource::kStatus);
        // The deletion's precondition follows our own write.
        if (!options.precondition_resource_version.empty()) {
          options.precondition_resource_version = (*written.object)["metadata"].value("resourceVersion", "");
        }
        break;
      } catch (const ApiError& e) {
        if (e.code() != 409 || attempt + 1 >= kConflictRetries) throw;
      }
    }
  }
  store.remove(pods, ns, name, options);
}

json evict_pod(Store& store, const std::string& ns, const std::string& name, const json& eviction, DryRun dry_run) {
  if (!eviction.is_object()) throw bad_request("the request body is not an Eviction");
  const std::string kind = eviction.value("kind", "Eviction");
  const std::string api_version = eviction.value("apiVersion", "policy/v1");
  if (kind != "Eviction" || (api_version != "policy/v1" && api_version != "policy/v1beta1")) {
    throw bad_request("not a Eviction object: " + api_version + ", Kind=" + kind);
  }
  if (member(eviction, "metadata").value("name", "") != name) {
    throw bad_request("name in URL does not match name in Eviction object");
  }
  const DeleteOptions options = delete_options_of(eviction, dry_run);
  const ResourceType& pods = *store.registry().find("", "v1", "pods");
  const json success = make_status(201, "", "");

  const ObjectPtr pod = store.get(pods, ns, name);  // 404 pods "name" not found
  if (can_ignore_budget(*pod)) {
    DeleteOptions now = options;
    if (should_enforce_resource_version(*pod) && now.precondition_resource_version.empty()) {
      now.precondition_resource_version = (*pod)["metadata"].value("resourceVersion", "");
    }
    add_condition_and_delete(store, pods, ns, name, now);
    return success;
  }

  const std::vector<ObjectPtr> budgets = budgets_of(store, *pod, ns);
  if (budgets.size() > 1) {
    return make_status(500, "",
                       "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                       "support.");
  }
  DeleteOptions deletion = options;
  bool enforced = false;
  if (budgets.size() == 1) {
    const std::string budget = (*budgets[0])["metadata"].value("name", "");
    const json& status = member(*budgets[0], "status");
    const int64_t current = status.is_object() ? status.value("currentHealthy", int64_t{0}) : 0;
    const int64_t desired = status.is_object() ? status.value("desiredHealthy", int64_t{0}) : 0;
    if (!pod_ready(*pod) && current >= desired && desired > 0) {
      // An unready pod of a budget that is met: evicting it disrupts nothing, so nothing is spent.
      enforced = true;
    } else {
      check_and_decrement(store, ns, name, budget, options.dry_run == DryRun::kAll);
    }
    if (enforced && deletion.precondition_resource_version.empty()) {
      deletion.precondition_resource_version = (*pod)["metadata"].value("resourceVersion", "");
    }
    try {
      add_condition_and_delete(store, pods, ns, name, deletion);
    } catch (const ApiError& e) {
      if (e.code() == 409 && enforced && options.precondition_resource_version.empty()) throw still_processed(budget);
      throw;
    }
    return success;
  }
  add_condition_and_delete(store, pods, ns, name, deletion);
  return success;
}

}  // namespace torus::standin

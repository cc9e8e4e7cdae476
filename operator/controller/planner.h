#pragma once
// The reconciler's brain, a pure function: (job, observed children, now) -> actions. No I/O, no clock, no
// randomness (the caller passes a fresh rendezvous secret), so every case is a table-driven test.
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/api/training_job.h"
#include "operator/controller/gang_policy.h"
#include "operator/controller/job_view.h"
#include "operator/controller/topology_blocks.h"
#include "operator/controller/worker_state.h"

namespace torus::controller {

using json = nlohmann::json;

// kClaim: the checkpoint claim made from training.checkpoint.volumeClaimTemplate (checkpoint_storage.h).
enum class ChildKind { kPod, kService, kConfigMap, kSecret, kPodGroup, kClaim };
const char* to_string(ChildKind kind);  // "Pod", "Service", ...

// A child the API server refused for good: 400 BadRequest or 422 Invalid. The same spec builds the same object, so
// no retry can succeed; the job fails (Failed/InvalidSpec, a Warning event) instead of retrying in silence.
struct RefusedChild {
  ChildKind kind = ChildKind::kPod;
  std::string name;
  int code = 0;         // the HTTP status
  std::string message;  // the server's, which names the field
  // kForGood (400, 422): the object as built is wrong, and the same spec builds it again: the job fails.
  // kByAdmission (403): the namespace's policy refuses it (Pod Security, Priority, a missing ServiceAccount...): the
  // job stays Pending with PodsWaiting=True FailedCreate and is retried with backoff, as the Job controller retries.
  enum class Refusal { kForGood, kByAdmission } refusal = Refusal::kForGood;
};

struct CreateAction {
  ChildKind kind;
  json object;
};

// A PUT of an existing child (carrying the observed resourceVersion: a 409 means the cache was stale).
struct UpdateAction {
  ChildKind kind;
  json object;
};

struct DeleteAction {
  ChildKind kind;
  std::string name;
  std::string reason;
};

enum class EventType { kNormal, kWarning };

struct EventRecord {
  EventType type = EventType::kNormal;
  std::string reason;
  std::string message;
};

// One observed child, shared with the informer's cache and never copied by a pass (a pass reads each of a job's pods
// several times). Made from the cache's shared pointer, or from a json value (tests) explicitly, so that no copy of a
// child is made by accident; reads as a const json&.
class ObjectRef {
 public:
  explicit ObjectRef(json object) : ptr_(std::make_shared<const json>(std::move(object))) {}
  ObjectRef(std::shared_ptr<const json> object) : ptr_(std::move(object)) {}  // NOLINT: implicit, as a pointer copy
  operator const json&() const { return *ptr_; }                              // NOLINT: implicit on purpose
  const json& operator*() const { return *ptr_; }
  const json* operator->() const { return ptr_.get(); }

 private:
  std::shared_ptr<const json> ptr_;
};
using Objects = std::vector<ObjectRef>;
// Objects from json values (tests).
inline Objects objects_of(std::vector<json> values) {
  Objects out;
  out.reserve(values.size());
  for (auto& v : values) out.emplace_back(std::move(v));
  return out;
}

// object[key] without a copy (json::value copies): an empty object when `object` is no object or has no such key.
inline const json& member(const json& object, std::string_view key) {
  static const json kEmpty = json::object();
  if (!object.is_object()) return kEmpty;
  auto it = object.find(key);
  return it == object.end() ? kEmpty : *it;
}

// Whether `object`'s controller owner reference names `uid`: the job's own child, not one of an earlier job of the
// same name that garbage collection has yet to remove.
inline bool controlled_by(const json& object, const std::string& uid) {
  for (const auto& ref : member(member(object, "metadata"), "ownerReferences")) {
    if (ref.value("uid", "") == uid && ref.value("controller", false)) return true;
  }
  return false;
}

struct PlanInput {
  json job;      // the TrainingJob as stored (metadata, spec, status)
  Objects pods;  // pods owned by the job (any attempt)
  Objects services;
  Objects config_maps;
  Objects secrets;
  TimePoint now;
  std::string fresh_secret;  // used only when the Secret must be created
  // For jobs with runPolicy.topology.key: the nodes' values of that label; nullopt when nodes cannot be read.
  std::optional<BlockMap> node_blocks;
  // Set when applying the previous plan of this pass met a create the server refused for good: this plan fails it.
  std::optional<RefusedChild> refused_child;
  // view_job(job), when the caller keeps it (JobViews); null: the pass computes it.
  std::shared_ptr<const JobView> view;
  // Pods of the job that are gone, as last seen, that carried a DisruptionTarget condition (DisruptedPods): a worker
  // that vanished from a running gang keeps its disruption, so its restart spends no backoffLimit.
  Objects gone_pods;
};

// What the reconciler should do; applied in order: deletes, updates, creates, status, events, job deletion.
struct Plan {
  std::vector<DeleteAction> deletes;
  std::vector<UpdateAction> updates;
  std::vector<CreateAction> creates;
  std::optional<json> status;  // the whole new status, only when it changed
  std::vector<EventRecord> events;
  std::optional<std::chrono::seconds> requeue_after;
  enum class JobAction { kKeep, kDelete } job_action = JobAction::kKeep;    // TTL after finish
  enum class Ownership { kOurs, kHandedOff } ownership = Ownership::kOurs;  // managedBy names someone else
  std::string invalid_spec;  // non-empty: the spec did not validate (status says why)
};

Plan plan(const PlanInput& input);

}  // namespace torus::controller

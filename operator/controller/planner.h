#pragma once
// The reconciler's brain, a pure function: (job, observed children, now) -> actions. No I/O, no clock, no
// randomness (the caller passes a fresh rendezvous secret), so every case is a table-driven test.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "operator/controller/gang_policy.h"
#include "operator/controller/topology_blocks.h"

namespace torus::controller {

using json = nlohmann::json;

enum class ChildKind { kPod, kService, kConfigMap, kSecret, kPodGroup };
const char* to_string(ChildKind kind);  // "Pod", "Service", ...

// A child the API server refused for good: 400 BadRequest or 422 Invalid. The same spec builds the same object, so
// no retry can succeed; the job fails (Failed/InvalidSpec, a Warning event) instead of retrying in silence.
struct RefusedChild {
  ChildKind kind = ChildKind::kPod;
  std::string name;
  int code = 0;         // the HTTP status
  std::string message;  // the server's, which names the field
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

struct PlanInput {
  json job;                // the TrainingJob as stored (metadata, spec, status)
  std::vector<json> pods;  // pods owned by the job (any attempt)
  std::vector<json> services;
  std::vector<json> config_maps;
  std::vector<json> secrets;
  TimePoint now;
  std::string fresh_secret;  // used only when the Secret must be created
  // For jobs with runPolicy.topology.key: the nodes' values of that label; nullopt when nodes cannot be read.
  std::optional<BlockMap> node_blocks;
  // Set when applying the previous plan of this pass met a create the server refused for good: this plan fails it.
  std::optional<RefusedChild> refused_child;
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

// The gang's view of one pod's main container (exposed for tests and the local runner's parity checks).
WorkerState worker_state(const json& pod);

}  // namespace torus::controller

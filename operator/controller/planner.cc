#include "operator/controller/planner.h"

#include <algorithm>
#include <map>

#include "common/api/codec.h"
#include "common/api/resolve.h"
#include "operator/controller/checkpoint_storage.h"
#include "operator/controller/children.h"
#include "operator/controller/goodput_status.h"
#include "operator/controller/labels.h"
#include "operator/controller/pods_waiting.h"
#include "operator/controller/spec_edits.h"
#include "operator/controller/time_util.h"
#include "operator/controller/worker_state.h"

namespace torus::controller {
namespace {

using api::ConditionStatus;
using api::Phase;

// The metadata fields the API model knows; the server adds others (managedFields...) that are not ours to read.
std::string label(const json& obj, std::string_view key) {
  const json& labels = member(member(obj, "metadata"), "labels");
  auto it = labels.find(key);
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string annotation(const json& obj, std::string_view key) {
  const json& annotations = member(member(obj, "metadata"), "annotations");
  auto it = annotations.find(key);
  return it != annotations.end() && it->is_string() ? it->get<std::string>() : "";
}

bool terminating(const json& obj) { return obj["metadata"].contains("deletionTimestamp"); }

std::string pod_phase(const json& pod) { return member(pod, "status").value("phase", "Pending"); }

bool pod_ready(const json& pod) {
  for (const auto& c : member(member(pod, "status"), "conditions")) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

int worker_index(const json& pod) {
  std::string v = label(pod, kLabelWorkerIndex);
  return v.empty() ? -1 : std::atoi(v.c_str());
}

api::Condition condition(std::string_view type, ConditionStatus status, std::string reason, std::string message,
                         TimePoint now, std::optional<int64_t> generation) {
  return api::Condition{str(type), status, std::move(reason), std::move(message), format_time(now), generation};
}

// Everything a pass works on: the decoded job, its status being rewritten, and the plan being built.
struct Pass {
  const PlanInput& in;
  std::shared_ptr<const JobView> view;
  const api::TrainingJob& job;  // view's
  api::TrainingJobStatus status;
  Plan plan;
  BlocksPlan blocks;      // the node -> block map the workers get, if any
  std::string spec_hash;  // the fingerprint of the attempt spec the job asks for now (spec_edits.h)

  int attempt() const { return status.attempt; }  // 0-based, as status.attempt, the pod label and TORUS_ATTEMPT
  const std::string& name() const { return job.metadata.name; }

  void set(std::string_view type, ConditionStatus s, std::string reason, std::string message) {
    api::set_condition(status,
                       condition(type, s, std::move(reason), std::move(message), in.now, job.metadata.generation));
  }
  void clear(std::string_view type, std::string reason) {
    if (const auto* c = api::find_condition(status, type); c && c->status == ConditionStatus::kTrue) {
      set(type, ConditionStatus::kFalse, std::move(reason), "");
    }
  }
  void event(EventType type, std::string reason, std::string message) {
    plan.events.push_back({type, std::move(reason), std::move(message)});
  }
  void remove_pod(const json& pod, const std::string& why) {
    if (terminating(pod)) return;
    plan.deletes.push_back({ChildKind::kPod, pod["metadata"].value("name", ""), why});
  }
  void requeue(std::chrono::seconds after) {
    plan.requeue_after = plan.requeue_after ? std::min(*plan.requeue_after, after) : after;
  }
};

bool finished(const std::optional<Phase>& phase) { return phase == Phase::kSucceeded || phase == Phase::kFailed; }

// Active and ready follow the pods; succeeded and failed of a finished job never go down, as a Job's do: a finished
// pod deleted later (cleanPodPolicy All, kubectl delete) still ran to its end.
void count_workers(Pass& p, const api::TrainingJobStatus& before) {
  api::WorkerCounts counts;
  for (const json& pod : p.in.pods) {
    if (label(pod, kLabelAttempt) != std::to_string(p.attempt()) || terminating(pod)) continue;
    std::string phase = pod_phase(pod);
    if (phase == "Succeeded") ++counts.succeeded;
    if (phase == "Failed") ++counts.failed;
    if (phase == "Pending" || phase == "Running") ++counts.active;
    if (phase == "Running" && pod_ready(pod)) ++counts.ready;
  }
  if (finished(before.phase)) {
    counts.succeeded = std::max(counts.succeeded, before.workers.succeeded);
    counts.failed = std::max(counts.failed, before.workers.failed);
  }
  p.status.workers = counts;
}

// The node's rack for status.ranks, for jobs with a topology key ("" when unknown).
std::string block_of(const Pass& p, const std::string& node) {
  if (p.job.spec.run_policy.topology.key.empty() || !p.in.node_blocks) return "";
  auto it = p.in.node_blocks->find(node);
  return it == p.in.node_blocks->end() ? "" : it->second;
}

// rank -> pod -> node (-> block), ordered by rank, for the pods of this attempt that are bound to a node.
void map_ranks(Pass& p) {
  int ppw = p.job.spec.gang.processes_per_worker.value_or(1);
  std::vector<api::RankPlacement> ranks;
  for (const json& pod : p.in.pods) {
    if (label(pod, kLabelAttempt) != std::to_string(p.attempt()) || terminating(pod)) continue;
    int index = worker_index(pod);
    std::string node = member(pod, "spec").value("nodeName", "");
    if (index < 0 || node.empty()) continue;
    for (int local = 0; local < ppw; ++local) {
      ranks.push_back({index * ppw + local, index, local, pod["metadata"].value("name", ""), node, block_of(p, node)});
    }
  }
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  p.status.ranks = std::move(ranks);
}

void clean_pods(Pass& p) {
  auto policy = p.job.spec.run_policy.clean_pod_policy.value_or(api::CleanPodPolicy::kRunning);
  for (const json& pod : p.in.pods) {
    std::string phase = pod_phase(pod);
    bool active = phase == "Pending" || phase == "Running" || phase == "Unknown";
    if (policy == api::CleanPodPolicy::kAll || (policy == api::CleanPodPolicy::kRunning && active)) {
      p.remove_pod(pod, "job finished (cleanPodPolicy " + str(api::to_string(policy)) + ")");
    }
  }
}

void apply_ttl(Pass& p) {
  auto ttl = p.job.spec.run_policy.ttl_seconds_after_finished;
  if (!ttl) return;
  TimePoint done = parse_time(p.status.completion_time).value_or(p.in.now);
  TimePoint expiry = done + std::chrono::seconds(*ttl);
  if (p.in.now >= expiry) {
    p.plan.job_action = Plan::JobAction::kDelete;
    p.event(EventType::kNormal, "TTLExpired", "deleting the job " + std::to_string(*ttl) + "s after it finished");
  } else {
    p.requeue(std::chrono::ceil<std::chrono::seconds>(expiry - p.in.now));
  }
}

void finish(Pass& p, Phase phase, std::string_view type, const std::string& reason, const std::string& message) {
  p.status.phase = phase;
  p.status.completion_time = format_time(p.in.now);
  p.set(type, ConditionStatus::kTrue, reason, message);
  p.clear(api::condition::kRunning, reason);
  p.clear(api::condition::kRestarting, reason);
  p.event(phase == Phase::kSucceeded ? EventType::kNormal : EventType::kWarning, reason, message);
}

bool has_named(const Objects& objects, const std::string& name) {
  return std::any_of(objects.begin(), objects.end(),
                     [&](const ObjectRef& o) { return (*o)["metadata"].value("name", "") == name; });
}

const json* find_named(const Objects& objects, const std::string& name) {
  for (const json& o : objects) {
    if (o["metadata"].value("name", "") == name) return &o;
  }
  return nullptr;
}

// Whether a pass may rewrite the job file: only before the pods of an attempt are created (spec_edits.h).
enum class JobFile { kKeep, kRewrite };

// Level-triggered: the ConfigMap's block map follows the nodes' labels; with kRewrite, job.json and the spec
// annotations become the spec of the attempt about to start. Written (a PUT, before the pass's creates) only when
// it differs.
void sync_config_map(Pass& p, const json& config_map, JobFile file) {
  json wanted = config_map;
  if (!wanted.contains("data") || !wanted["data"].is_object()) wanted["data"] = json::object();
  const std::string key = str(kBlocksFileName);
  if (p.blocks.ordering == RackOrdering::kMounted) {
    wanted["data"][key] = p.blocks.text;
  } else {
    wanted["data"].erase(key);
  }
  if (file == JobFile::kRewrite) {
    const json fresh = build_config_map(p.job, p.attempt(), p.blocks, p.spec_hash);
    wanted["data"][str(kJobFileName)] = fresh["data"][str(kJobFileName)];
    wanted["metadata"]["annotations"] =
        merge_objects(wanted["metadata"].value("annotations", json::object()), fresh["metadata"]["annotations"]);
    wanted["metadata"]["labels"][str(kLabelAttempt)] = std::to_string(p.attempt());
  }
  if (wanted != config_map) p.plan.updates.push_back({ChildKind::kConfigMap, std::move(wanted)});
}

// The RackOrdering condition (jobs with a topology key), and a warning event when ordering goes off.
void report_rack_ordering(Pass& p) {
  const std::string& key = p.job.spec.run_policy.topology.key;
  switch (p.blocks.ordering) {
    case RackOrdering::kNotRequested:
      return;
    case RackOrdering::kMounted:
      p.set(api::condition::kRackOrdering, ConditionStatus::kTrue, "BlockMapMounted",
            "workers read their node's '" + key + "' label from " + str(kBlocksFileName) + " in ConfigMap " +
                config_map_name(p.name()));
      return;
    case RackOrdering::kTooLarge:
    case RackOrdering::kNodesNotReadable:
      break;
  }
  const bool too_large = p.blocks.ordering == RackOrdering::kTooLarge;
  std::string reason = too_large ? "BlockMapTooLarge" : "NodesNotReadable";
  std::string message = too_large
                            ? "the node -> '" + key + "' map exceeds " + std::to_string(kMaxBlockMapBytes / 1024) +
                                  " KiB (ConfigMap limit 1 MiB): rack ordering is off for this job"
                            : "the operator cannot list nodes (RBAC: get/list/watch nodes): rack ordering by '" + key +
                                  "' is off for this job";
  const auto* c = api::find_condition(p.status, api::condition::kRackOrdering);
  if (!c || c->status != ConditionStatus::kFalse || c->reason != reason) {
    p.event(EventType::kWarning, "RackOrderingOff", message);
  }
  p.set(api::condition::kRackOrdering, ConditionStatus::kFalse, reason, message);
}

void ensure_shared_children(Pass& p) {
  if (!has_named(p.in.services, service_name(p.name()))) {
    p.plan.creates.push_back({ChildKind::kService, build_service(p.job, p.attempt())});
  }
  if (!find_named(p.in.config_maps, config_map_name(p.name()))) {
    p.plan.creates.push_back({ChildKind::kConfigMap, build_config_map(p.job, p.attempt(), p.blocks, p.spec_hash)});
  }
  report_rack_ordering(p);
  if (!has_named(p.in.secrets, secret_name(p.name()))) {
    p.plan.creates.push_back({ChildKind::kSecret, build_secret(p.job, p.attempt(), p.in.fresh_secret)});
  }
}

// A worker whose pod vanished from the running gang. Without a word it counts as killed (137: node lost, deleted by
// hand): its peers cannot go on without it. A pod last seen with a DisruptionTarget condition (in.gone_pods) keeps
// it, and its exit when it had one, so the restart is charged to the disruption.
WorkerState vanished_worker(const Pass& p, const std::string& name) {
  const std::string attempt = std::to_string(p.attempt());
  for (const json& gone : p.in.gone_pods) {
    if (gone["metadata"].value("name", "") != name || label(gone, kLabelAttempt) != attempt) continue;
    WorkerState w = worker_state(gone);
    w.disruption = disruption_of(gone);
    if (!w.disruption) break;
    if (w.phase != PodPhase::kSucceeded && w.phase != PodPhase::kFailed) {
      w.phase = PodPhase::kFailed;
      w.exit_code = 137;
      w.detail = "pod deleted after its disruption";
    }
    return w;
  }
  return {name, PodPhase::kFailed, 137, std::nullopt, "pod disappeared while the gang was running"};
}

// The gang as the policy sees it: the attempt's pods, and the workers whose pods vanished (vanished_worker).
GangObservation observe(Pass& p, const Objects& current) {
  GangObservation g;
  g.expected_workers = p.job.spec.gang.workers.value_or(1);
  g.attempt = p.attempt();
  g.restarts = p.status.restarts;
  g.now = p.in.now;
  g.job_start = parse_time(p.status.start_time).value_or(p.in.now);
  g.attempt_start = p.in.now;
  std::map<int, const json*> by_index;
  for (const json& pod : current) {
    by_index[worker_index(pod)] = &pod;
    if (auto t = parse_time(pod["metadata"].value("creationTimestamp", ""))) {
      g.attempt_start = std::min(g.attempt_start, *t);
    }
    g.workers.push_back(worker_state(pod));
  }
  if (const auto* c = api::find_condition(p.status, api::condition::kRunning);
      c && c->status == ConditionStatus::kTrue) {
    g.running_since = parse_time(c->last_transition_time).value_or(p.in.now);
  }
  if (g.running_since) {
    for (int i = 0; i < g.expected_workers; ++i) {
      if (by_index.count(i)) continue;
      g.workers.push_back(vanished_worker(p, worker_pod_name(p.name(), i)));
    }
  }
  return g;
}

bool all_running(const GangObservation& g) {
  if (static_cast<int>(g.workers.size()) < g.expected_workers) return false;
  return std::all_of(g.workers.begin(), g.workers.end(), [](const WorkerState& w) {
    return w.phase == PodPhase::kRunning || w.phase == PodPhase::kSucceeded;
  });
}

void restart_gang(Pass& p, const Objects& current, const Decision& d, const GangObservation& g) {
  // The step the survivors reached is where the attempt's work ends: its lost work counts from there.
  for (const WorkerState& w : g.workers) {
    if (w.last_step) p.status.goodput = with_step_reached(p.status.goodput, p.status.attempt, *w.last_step);
  }
  for (const json& pod : current) p.remove_pod(pod, "gang restart: " + d.message);
  p.status.attempt += 1;
  // A disruption is the platform's doing, not the job's: counted apart, it spends no backoffLimit, and its event is
  // Normal (it names the pod, its node and the condition's reason).
  const bool disrupted = d.reason == Reason::kDisrupted;
  (disrupted ? p.status.disruptions : p.status.restarts) += 1;
  p.status.phase = Phase::kRestarting;
  p.status.ranks.clear();
  p.set(api::condition::kRestarting, ConditionStatus::kTrue, to_string(d.reason), d.message);
  p.clear(api::condition::kRunning, "GangRestarting");
  if (disrupted) {
    p.event(EventType::kNormal, to_string(d.reason), d.message);
  } else {
    p.event(EventType::kWarning, "GangRestart", d.message);
  }
}

void run_gang(Pass& p, const Objects& current) {
  GangObservation g = observe(p, current);
  Decision d = decide(gang_policy_of(p.job.spec), g);
  switch (d.verdict) {
    case Verdict::kRestart:
      return restart_gang(p, current, d, g);
    case Verdict::kFail:
      finish(p, Phase::kFailed, api::condition::kFailed, to_string(d.reason), d.message);
      return;
    case Verdict::kSucceed:
      if (auto last = final_progress(g, p.status.progress, format_time(p.in.now))) p.status.progress = *last;
      finish(p, Phase::kSucceeded, api::condition::kSucceeded, "AllWorkersSucceeded", d.message);
      return;
    case Verdict::kContinue:
      break;
  }
  if (d.recheck_after) p.requeue(*d.recheck_after);
  std::map<int, bool> present;
  for (const json& pod : current) present[worker_index(pod)] = true;
  // The PodGroup goes first, so the gang scheduler knows the group when its pods arrive (created again with each
  // missing pod: "already exists" is the usual answer, and the operator keeps no cache of PodGroups).
  if (static_cast<int>(present.size()) < g.expected_workers) {
    if (auto group = build_pod_group(p.job, p.attempt())) p.plan.creates.push_back({ChildKind::kPodGroup, *group});
  }
  // The checkpoint claim, likewise, before worker 0's pod that mounts it (it outlives attempts: made once, then
  // "already exists").
  if (!present.count(0)) {
    if (auto claim = build_checkpoint_claim(p.job)) p.plan.creates.push_back({ChildKind::kClaim, *claim});
  }
  for (int i = 0; i < g.expected_workers; ++i) {
    if (!present.count(i)) {
      p.plan.creates.push_back({ChildKind::kPod, build_worker_pod(p.job, i, p.attempt(), p.blocks, p.spec_hash)});
    }
  }
  if (all_running(g)) {
    const std::string message = "all " + std::to_string(g.expected_workers) + " workers of attempt " +
                                std::to_string(p.attempt()) + " are running";
    // The first attempt's start makes no event: the Running condition says it with its time (`kubectl describe`
    // lists conditions), one request less per job (docs/operator.md). A later attempt's does, ending the story its
    // GangRestart, SpecChanged or Resumed event began.
    if (p.status.phase != Phase::kRunning && p.attempt() > 0) p.event(EventType::kNormal, "GangRunning", message);
    if (p.status.phase != Phase::kRunning)
      p.status.goodput.scheduling_seconds += scheduling_seconds(std::vector<json>(current.begin(), current.end()));
    p.status.phase = Phase::kRunning;
    p.set(api::condition::kRunning, ConditionStatus::kTrue, "GangRunning", message);
    p.clear(api::condition::kRestarting, "GangRunning");
  } else if (p.status.phase != Phase::kRestarting) {
    p.status.phase = Phase::kPending;
  }
  // Cleared once every worker's pod exists and none waits for a fix (a create that admission refuses leaves a pod
  // missing: its condition stays until the pod is made).
  if (const auto why = why_waiting(g)) {
    p.set(api::condition::kPodsWaiting, ConditionStatus::kTrue, why->reason, why->message);
  } else if (static_cast<int>(g.workers.size()) >= g.expected_workers) {
    p.clear(api::condition::kPodsWaiting, "PodsStarted");
  }
}

// Pods of the current attempt, in any state (being deleted included).
bool attempt_has_pods(const Pass& p) {
  return std::any_of(p.in.pods.begin(), p.in.pods.end(),
                     [&](const json& pod) { return label(pod, kLabelAttempt) == std::to_string(p.attempt()); });
}

// Suspending ends the attempt that has pods: resuming starts the next one, with the spec of that moment.
void suspend(Pass& p) {
  for (const json& pod : p.in.pods) p.remove_pod(pod, "job suspended");
  if (p.status.phase != Phase::kSuspended) {
    if (attempt_has_pods(p)) p.status.attempt += 1;
    p.status.phase = Phase::kSuspended;
    p.set(api::condition::kSuspended, ConditionStatus::kTrue, "Suspended", "spec.runPolicy.suspend is true");
    p.clear(api::condition::kRunning, "Suspended");
    p.event(EventType::kNormal, "Suspended", "worker pods deleted; the job resumes from its last checkpoint");
  }
}

void resume(Pass& p) {
  p.status.phase = Phase::kPending;
  p.status.start_time = format_time(p.in.now);  // as Kubernetes Jobs do: the active deadline restarts
  p.set(api::condition::kSuspended, ConditionStatus::kFalse, "Resumed", "spec.runPolicy.suspend is false");
  p.event(EventType::kNormal, "Resumed",
          "recreating the worker pods as attempt " + std::to_string(p.attempt()) + " from the last checkpoint");
}

// When the operator first acted on a job that has no status yet: its earliest child's creation (the first pass
// creates them), else now. The accepted status waits to be written with the gang's first transition
// (StatusPacing), so every pass until then must derive the same start time.
TimePoint first_acted(const PlanInput& in) {
  std::optional<TimePoint> first;
  for (const Objects* children : {&in.pods, &in.services, &in.config_maps, &in.secrets}) {
    for (const json& child : *children) {
      if (auto t = parse_time(member(child, "metadata").value("creationTimestamp", ""))) {
        first = first ? std::min(*first, *t) : *t;
      }
    }
  }
  return first.value_or(in.now);
}

// No event: the Created condition says it with its time (one request less per job; docs/operator.md). A job its
// validation refuses was not accepted and gets no children: no Created condition, its Failed one says why.
void start(Pass& p) {
  const TimePoint started = first_acted(p.in);
  p.status.phase = Phase::kPending;
  p.status.start_time = format_time(started);
  if (!p.view->errors.empty()) return;
  api::set_condition(p.status,
                     condition(api::condition::kCreated, ConditionStatus::kTrue, "JobCreated",
                               "the operator accepted the job: " + std::to_string(p.job.spec.gang.workers.value_or(1)) +
                                   " worker pods, their service, config map and secret",
                               started, p.job.metadata.generation));
}

// Pods made from another attempt spec than the one the job asks for now (pods without the annotation, made by an
// older operator, count as current).
bool built_from_another_spec(const Pass& p, const Objects& pods) {
  return std::any_of(pods.begin(), pods.end(), [&](const json& pod) {
    const std::string hash = annotation(pod, kAnnotationSpecHash);
    return !hash.empty() && hash != p.spec_hash;
  });
}

// The spec the ConfigMap holds: the running attempt's (null when it does not read).
json spec_of(const json& config_map) {
  const json doc = json::parse(config_map.value("data", json::object()).value(str(kJobFileName), ""), nullptr, false);
  return doc.is_object() && doc.contains("spec") ? doc["spec"] : json();
}

// "spec.gang.workers: 2 -> 3, ...", from the spec the ConfigMap holds (the cache may lag: this only words events).
std::string describe_edit(const Pass& p, const json* config_map) {
  if (config_map && !spec_of(*config_map).is_null()) {
    std::string text;
    for (const auto& change : changed_fields(spec_of(*config_map), api::to_json(p.job)["spec"]))
      text += (text.empty() ? "" : ", ") + change;
    if (!text.empty()) return text;
  }
  return "the spec changed (generation " + std::to_string(p.job.metadata.generation.value_or(0)) + ")";
}

// An edit of the running attempt's spec: a new attempt from the last checkpoint (the workers checkpoint on SIGTERM),
// not a failure: status.restarts and the backoffLimit budget stay as they are.
void restart_for_edit(Pass& p, const Objects& current, const json* config_map) {
  const std::string what = describe_edit(p, config_map);
  for (const json& pod : current) p.remove_pod(pod, "spec edited: " + what);
  p.status.attempt += 1;
  p.status.phase = Phase::kRestarting;
  p.status.ranks.clear();
  const std::string from = start_after_edit(p.status, p.job, config_map ? spec_of(*config_map) : json());
  const std::string message = what + "; restarting the gang as attempt " + std::to_string(p.attempt()) + from +
                              " (an edit, not a failure: restarts and backoffLimit unchanged)";
  p.set(api::condition::kRestarting, ConditionStatus::kTrue, "SpecChanged", message);
  p.clear(api::condition::kRunning, "SpecChanged");
  p.event(EventType::kNormal, "SpecChanged", message);
}

void reconcile_active(Pass& p) {
  ensure_shared_children(p);
  const json* config_map = find_named(p.in.config_maps, config_map_name(p.name()));
  if (p.job.spec.run_policy.suspend.value_or(false)) {
    if (config_map) sync_config_map(p, *config_map, JobFile::kKeep);
    return suspend(p);
  }
  if (p.status.phase == Phase::kSuspended) resume(p);
  // Pods of an earlier attempt, or being deleted, must be gone before their names can be reused.
  Objects current;
  bool waiting_for_old = false;
  for (const ObjectRef& pod : p.in.pods) {
    if (label(*pod, kLabelAttempt) == std::to_string(p.attempt()) && !terminating(*pod)) {
      current.push_back(pod);
    } else {
      p.remove_pod(pod, "pod of an earlier attempt");
      waiting_for_old = true;
    }
  }
  if (built_from_another_spec(p, current)) {
    if (config_map) sync_config_map(p, *config_map, JobFile::kKeep);
    return restart_for_edit(p, current, config_map);
  }
  // An attempt whose pods are all still to be created mounts the spec of this moment: the PUT precedes the creates.
  if (config_map) {
    const bool starting = !waiting_for_old && current.empty();
    const bool stale = annotation(*config_map, kAnnotationSpecHash) != p.spec_hash;
    sync_config_map(p, *config_map, starting && stale ? JobFile::kRewrite : JobFile::kKeep);
  }
  if (waiting_for_old) {
    if (p.status.phase != Phase::kRestarting) p.status.phase = Phase::kRestarting;
    return;
  }
  run_gang(p, current);
}

// A child admission refused: nothing more is made this pass, and the condition says which and why.
void wait_for_admission(Pass& p, const RefusedChild& refused) {
  p.plan.creates.clear();
  p.set(api::condition::kPodsWaiting, ConditionStatus::kTrue, "FailedCreate",
        std::string(to_string(refused.kind)) + " " + refused.name + ": " + refused.message);
}

void fail_refused(Pass& p, const RefusedChild& refused) {
  finish(p, Phase::kFailed, api::condition::kFailed, "InvalidSpec",
         "the API server refused to create " + std::string(to_string(refused.kind)) + " " + refused.name + " (" +
             std::to_string(refused.code) + "): " + refused.message);
}

void fail_invalid(Pass& p, const api::FieldErrors& errors) {
  std::string message;
  for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e.to_string();
  p.plan.invalid_spec = message;
  if (finished(p.status.phase)) return;
  finish(p, Phase::kFailed, api::condition::kFailed, "InvalidSpec", message);
}

}  // namespace

const char* to_string(ChildKind kind) {
  switch (kind) {
    case ChildKind::kPod:
      return "Pod";
    case ChildKind::kService:
      return "Service";
    case ChildKind::kConfigMap:
      return "ConfigMap";
    case ChildKind::kSecret:
      return "Secret";
    case ChildKind::kPodGroup:
      return "PodGroup";
    case ChildKind::kClaim:
      return "PersistentVolumeClaim";
  }
  return "";
}

Plan plan(const PlanInput& in) {
  std::shared_ptr<const JobView> view = in.view ? in.view : view_job(in.job);
  Pass p{in, view, view->job, view->job.status, {}, {}, view->spec_hash};
  p.blocks = plan_blocks(p.job.spec.run_policy.topology.key, in.node_blocks);
  const api::TrainingJobStatus original = p.status;
  if (p.job.spec.run_policy.managed_by != kControllerName) {
    p.plan.ownership = Plan::Ownership::kHandedOff;
    return std::move(p.plan);
  }
  // Being deleted: garbage collection removes the children.
  if (!p.job.metadata.deletion_timestamp.empty()) return std::move(p.plan);
  if (!p.status.phase) start(p);
  const api::FieldErrors& errors = view->errors;
  if (!errors.empty()) {
    fail_invalid(p, errors);
  } else if (in.refused_child && in.refused_child->refusal == RefusedChild::Refusal::kForGood &&
             !finished(p.status.phase)) {
    fail_refused(p, *in.refused_child);
  } else if (!finished(p.status.phase)) {
    reconcile_active(p);
    if (in.refused_child) wait_for_admission(p, *in.refused_child);
  }
  if (finished(p.status.phase)) {
    clean_pods(p);
    apply_ttl(p);
  }
  // observedGeneration: the generation whose spec the job's pods run. It waits while pods made from an earlier spec
  // are still there (a spec edit tears them down, and the next attempt is made from this generation); a refused spec
  // is observed at once.
  if (!finished(original.phase) && (!errors.empty() || !built_from_another_spec(p, in.pods))) {
    p.status.observed_generation = p.job.metadata.generation;
  }
  count_workers(p, original);
  if (!finished(original.phase)) map_ranks(p);  // a finished job keeps the placement it ran with
  if (!(p.status == original)) p.plan.status = api::status_to_json(p.status);
  return std::move(p.plan);
}

}  // namespace torus::controller

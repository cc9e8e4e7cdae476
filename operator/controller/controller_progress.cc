// What the controller adds to a Running job's status from its ranks' /metrics beside status.progress (controller.cc,
// with_progress): the goodput ledger, the step each attempt resumed from, and the Straggler condition.
#include "common/api/codec.h"
#include "operator/controller/controller.h"
#include "operator/controller/labels.h"
#include "operator/controller/progress.h"
#include "operator/controller/time_util.h"

namespace torus::controller {

// status.goodput advanced by rank 0's ledger of the current attempt (operator/controller/goodput_status.h).
void Controller::record_goodput(json& status, const GoodputReading& reading, int64_t resumed_step) {
  // Only the goodput member is decoded: what this controller wrote last time.
  const json only_goodput = {{"status", {{"goodput", member(status, "goodput")}}}};
  const api::Goodput before = api::decode_json(only_goodput).job.status.goodput;
  const auto started = parse_time(status.value("startTime", ""));
  const double wall = started ? std::chrono::duration<double>(Clock::now() - *started).count() : 0;
  const api::Goodput next = next_goodput(before, reading, resumed_step, wall, format_time(Clock::now()));
  status["goodput"] = api::status_to_json(api::TrainingJobStatus{.goodput = next})["goodput"];
}

// Once per attempt: where its rank 0 started and why, in the status and (after a restart, a resume or an edit, or
// from another run's checkpoint) as an event, so that `kubectl describe` tells each attempt's starting point.
void Controller::record_resume(json& status, const api::ResumePoint& read, std::vector<EventRecord>& events) {
  const int attempt = status.value("attempt", 0);
  const json& known = member(status, "resumedFrom");
  if (read.attempt != attempt) return;
  if (known.value("attempt", -1) == attempt && !known.value("time", "").empty()) return;
  api::ResumePoint point = read;
  point.time = format_time(Clock::now());
  status["resumedFrom"] = api::status_to_json(api::TrainingJobStatus{.resumed_from = point})["resumedFrom"];
  if (const auto message = resume_event_message(point))
    events.push_back({EventType::kNormal, "ResumedFromStep", *message});
}

void Controller::record_straggler(const json& job, json& status, const std::optional<RankArrival>& rank0,
                                  std::vector<EventRecord>& events) {
  const json& gang = member(member(job, "spec"), "gang");
  const int per_pod = std::max(gang.value("processesPerWorker", 1), 1);
  const int world = gang.value("workers", 1) * per_pod;
  const std::string ns = job["metadata"].value("namespace", "");
  const std::string name = job["metadata"].value("name", "");
  const Caches* caches = caches_of(ns);
  if (world < 2 || !caches) return;
  const int attempt = status.value("attempt", 0);
  // Rank r is local rank r % per_pod of worker pod r / per_pod; each answers for its own attempt's figures only.
  std::vector<RankTarget> targets;
  for (int r = 1; r < world; ++r) {
    const kube::ObjectPtr pod = caches->pods->store().get(ns + "/" + worker_pod_name(name, r / per_pod));
    if (!pod) continue;
    if (auto t = rank_target(job, *pod, r % per_pod, r)) targets.push_back(*t);
  }
  std::map<int, RankArrival> ranks = progress_.read_arrivals(targets, attempt);
  if (rank0) ranks[0] = *rank0;
  const auto window = stragglers_.feed(kube::object_key(job), attempt, world, ranks);
  if (!window) return;
  observe_straggler(job, *window);
  const std::string pod = worker_pod_name(name, window->slowest.rank / per_pod);
  const kube::ObjectPtr cached = caches->pods->store().get(ns + "/" + pod);
  const RankPlace place{pod, cached ? member(*cached, "spec").value("nodeName", "") : ""};
  // Only the conditions are decoded and written back: the rest of the status is the pass's json.
  api::TrainingJobStatus conditions =
      api::decode_json({{"status", {{"conditions", member(status, "conditions")}}}}).job.status;
  const auto generation = job["metadata"].contains("generation")
                              ? std::optional<int64_t>(job["metadata"].value("generation", int64_t{0}))
                              : std::nullopt;
  const StragglerUpdate u = apply_straggler_window(conditions, *window, place, generation, format_time(Clock::now()));
  if (u.changed) status["conditions"] = api::status_to_json(conditions)["conditions"];
  if (u.event) events.push_back(*u.event);
}

void Controller::observe_straggler(const json& job, const process::StragglerWindow& window) {
  if (!metrics_) return;
  const std::vector<std::string> labels{job["metadata"].value("namespace", ""), job["metadata"].value("name", "")};
  metrics_->straggler_slowdown.labels(labels).set(window.slowest.slowdown);
  metrics_->straggler_rank.labels(labels).set(window.slowest.rank);
}

}  // namespace torus::controller

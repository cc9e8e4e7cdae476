#include "operator/controller/straggler_status.h"

#include <cmath>
#include <cstdio>

#include "common/metrics/metric_names.h"
#include "operator/controller/progress.h"

namespace torus::controller {
namespace {

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "rank 1 (pod job-worker-1, node sim-node2)": who the condition and the events name; the condition's message starts
// with it, so a later window can tell whether it names the same rank.
std::string who(const process::Straggler& s, const RankPlace& place) {
  std::string w = "rank " + std::to_string(s.rank) + " (pod " + (place.pod.empty() ? "?" : place.pod);
  return w + ", node " + (place.node.empty() ? "?" : place.node) + ")";
}

// "... after 1.62x the gang's median own work per step (11.9 vs 7.3 ms)", as `torus run` says it.
std::string slowdown_text(const process::Straggler& s) {
  return fixed(s.slowdown, 2) + "x the gang's median own work per step (" + fixed(s.arrival_s * 1e3, 1) + " vs " +
         fixed(s.median_s * 1e3, 1) + " ms)";
}

}  // namespace

std::optional<RankArrival> rank_arrival_from_metrics(const std::map<std::string, double>& samples, int attempt) {
  const std::string family = std::string(metrics::name::kWorkerGoodputSecondsTotal) + "{";
  RankArrival a;
  bool found = false;
  for (auto it = samples.lower_bound(family); it != samples.end() && it->first.starts_with(family); ++it) {
    if (label_of(it->first, "attempt") != std::to_string(attempt) || !std::isfinite(it->second)) continue;
    const std::string part = label_of(it->first, "part");
    if (part != "data_wait" && part != "training") continue;
    a.offset_s += it->second;
    found = true;
  }
  // The steps of the same process (its series all carry its attempt): the step histogram's count.
  const auto steps = samples.find(std::string(metrics::name::kWorkerStepSeconds) + "_count");
  if (!found || steps == samples.end() || !std::isfinite(steps->second)) return std::nullopt;
  a.steps = static_cast<int64_t>(steps->second);
  return a;
}

StragglerUpdate apply_straggler_window(api::TrainingJobStatus& status, const process::StragglerWindow& window,
                                       const RankPlace& place, std::optional<int64_t> generation,
                                       const std::string& now_rfc3339) {
  const std::string type(kStragglerCondition);
  const api::Condition* before = api::find_condition(status, type);
  const bool was_true = before && before->status == api::ConditionStatus::kTrue;
  const process::Straggler& s = window.slowest;
  StragglerUpdate u;
  if (window.straggling) {
    const std::string named = who(s, place);
    const std::string message = named + " arrives at the all-reduce after " + slowdown_text(s);
    // News: a rank named for the first time since the condition was last True, or another rank than the last one.
    if (!was_true || !before->message.starts_with(named + " ")) {
      u.event = EventRecord{EventType::kWarning, "Straggler", message};
    }
    u.changed = api::set_condition(
        status, {type, api::ConditionStatus::kTrue, "RankArrivesLate", message, now_rfc3339, generation});
    return u;
  }
  // No condition before the first straggler; a False one stays as it is (no write per window while all is well).
  if (!was_true) return u;
  const std::string message = "no rank arrives at the all-reduce " + fixed(window.threshold, 2) +
                              "x the gang's median or later; the slowest, " + who(s, place) + ", after " +
                              slowdown_text(s);
  u.changed =
      api::set_condition(status, {type, api::ConditionStatus::kFalse, "Recovered", message, now_rfc3339, generation});
  u.event = EventRecord{EventType::kNormal, "StragglerRecovered", message};
  return u;
}

std::optional<process::StragglerWindow> StragglerWatches::feed(const std::string& key, int attempt, int world_size,
                                                               const std::map<int, RankArrival>& ranks) {
  std::lock_guard lock(mu_);
  auto it = watches_.find(key);
  if (it == watches_.end() || it->second.first != attempt) {
    it = watches_.insert_or_assign(key, std::make_pair(attempt, process::StragglerWatch(world_size))).first;
  }
  std::optional<process::StragglerWindow> closed;
  for (const auto& [rank, a] : ranks) {
    if (auto w = it->second.second.on_sample(rank, a.steps, a.offset_s)) closed = w;
  }
  return closed;
}

void StragglerWatches::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  watches_.erase(key);
}

}  // namespace torus::controller

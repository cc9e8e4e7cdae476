#include "operator/controller/goodput_status.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/metrics/metric_names.h"
#include "operator/controller/progress.h"
#include "operator/controller/time_util.h"

namespace torus::controller {
namespace {

double* part_of(api::GoodputSeconds& s, const std::string& part) {
  if (part == "startup") return &s.startup;
  if (part == "restore") return &s.restore;
  if (part == "training") return &s.training;
  if (part == "data_wait") return &s.data_wait;
  if (part == "comm_wait") return &s.comm_wait;
  if (part == "evaluation") return &s.evaluation;
  if (part == "checkpoint") return &s.checkpoint;
  return nullptr;
}

api::GoodputSeconds plus(api::GoodputSeconds a, const api::GoodputSeconds& b) {
  a.startup += b.startup;
  a.comm_init += b.comm_init;
  a.restore += b.restore;
  a.training += b.training;
  a.data_wait += b.data_wait;
  a.comm_wait += b.comm_wait;
  a.evaluation += b.evaluation;
  a.checkpoint += b.checkpoint;
  return a;
}

double sample_or_zero(const std::map<std::string, double>& s, const std::string& name) {
  auto it = s.find(name);
  return it == s.end() || !std::isfinite(it->second) ? 0 : it->second;
}

// The previous attempt's own parts (the status's totals less the attempts before it), with the share of its steps'
// time that `lost_s` was taken out of training and the waits alike.
api::GoodputSeconds kept_of_previous(const api::Goodput& before, double lost_s) {
  const api::GoodputSeconds& t = before.seconds;
  const api::GoodputSeconds& e = before.earlier_attempts;
  api::GoodputSeconds own{t.startup - e.startup,       t.comm_init - e.comm_init,  t.restore - e.restore,
                          t.training - e.training,     t.data_wait - e.data_wait,  t.comm_wait - e.comm_wait,
                          t.evaluation - e.evaluation, t.checkpoint - e.checkpoint};
  const double stepping = own.training + own.data_wait + own.comm_wait;
  const double keep = stepping > 0 ? std::clamp(1 - lost_s / stepping, 0.0, 1.0) : 1.0;
  own.training *= keep;
  own.data_wait *= keep;
  own.comm_wait *= keep;
  return own;
}

}  // namespace

double slowest_checkpoint_from_metrics(const std::map<std::string, double>& s, int attempt) {
  const std::string family = std::string(metrics::name::kWorkerCheckpointSeconds) + "_";
  const std::string of_attempt = std::to_string(attempt);
  double count = 0, sum = 0;
  std::optional<double> bound;  // the smallest `le` whose cumulative count is every save
  std::map<double, double> buckets;
  for (auto it = s.lower_bound(family); it != s.end() && it->first.starts_with(family); ++it) {
    if (it->first.find('{') == std::string::npos || label_of(it->first, "attempt") != of_attempt) continue;
    const std::string kind = it->first.substr(family.size(), it->first.find('{') - family.size());
    if (kind == "count") count = it->second;
    if (kind == "sum") sum = it->second;
    const std::string le = label_of(it->first, "le");
    if (kind == "bucket" && !le.empty() && le != "+Inf") buckets[std::strtod(le.c_str(), nullptr)] = it->second;
  }
  if (!(count > 0) || !std::isfinite(sum)) return 0;
  for (const auto& [le, cumulative] : buckets) {
    if (cumulative >= count) {
      bound = le;
      break;
    }
  }
  return bound ? std::min(*bound, sum) : sum;
}

std::optional<GoodputReading> goodput_from_metrics(const std::map<std::string, double>& s, int attempt) {
  const std::string family = std::string(metrics::name::kWorkerGoodputSecondsTotal) + "{";
  GoodputReading r{.attempt = attempt};
  bool found = false;
  for (auto it = s.lower_bound(family); it != s.end() && it->first.starts_with(family); ++it) {
    if (label_of(it->first, "attempt") != std::to_string(attempt) || !std::isfinite(it->second)) continue;
    if (double* part = part_of(r.seconds, label_of(it->first, "part"))) {
      *part = it->second;
      found = true;
    }
  }
  if (!found) return std::nullopt;
  r.seconds.comm_init = sample_or_zero(s, metrics::name::kWorkerCommInitSeconds);
  r.global_step = static_cast<int64_t>(sample_or_zero(s, metrics::name::kWorkerGlobalStep));
  const double count = sample_or_zero(s, std::string(metrics::name::kWorkerStepSeconds) + "_count");
  if (count > 0) r.step_seconds = sample_or_zero(s, std::string(metrics::name::kWorkerStepSeconds) + "_sum") / count;
  r.slowest_checkpoint_seconds = slowest_checkpoint_from_metrics(s, attempt);
  r.resume_known = resumed_step_from_metrics(s, attempt).has_value();
  return r;
}

double scheduling_seconds(const std::vector<nlohmann::json>& pods) {
  std::optional<TimePoint> first_created, last_started;
  for (const nlohmann::json& pod : pods) {
    const auto created = parse_time(pod["metadata"].value("creationTimestamp", ""));
    std::optional<TimePoint> started;
    for (const auto& c :
         pod.value("status", nlohmann::json::object()).value("containerStatuses", nlohmann::json::array())) {
      const nlohmann::json state = c.value("state", nlohmann::json::object());
      for (const char* s : {"running", "terminated"}) {
        if (state.contains(s)) started = parse_time(state[s].value("startedAt", ""));
      }
    }
    if (!created || !started) return 0;
    first_created = first_created ? std::min(*first_created, *created) : *created;
    last_started = last_started ? std::max(*last_started, *started) : *started;
  }
  if (!first_created) return 0;
  return std::max(std::chrono::duration<double>(*last_started - *first_created).count(), 0.0);
}

api::Goodput with_step_reached(const api::Goodput& g, int attempt, int64_t step) {
  api::Goodput out = g;
  if (g.attempt == attempt && step > g.last_step) out.last_step = step;
  return out;
}

api::Goodput next_goodput(const api::Goodput& before, const GoodputReading& now, int64_t resumed_step,
                          double wall_seconds, const std::string& now_rfc3339) {
  api::Goodput g = before;
  if (now.attempt > before.attempt && !now.resume_known) return g;
  if (now.attempt > before.attempt && (before.last_step > 0 || before.seconds != api::GoodputSeconds{})) {
    const int64_t lost_steps = std::max<int64_t>(before.last_step - resumed_step, 0);
    const double lost_s = static_cast<double>(lost_steps) * before.step_seconds;
    g.lost_steps += lost_steps;
    g.lost_work_seconds += lost_s;
    g.earlier_attempts = plus(before.earlier_attempts, kept_of_previous(before, lost_s));
  }
  g.attempt = now.attempt;
  g.seconds = plus(g.earlier_attempts, now.seconds);
  g.last_step = std::max(now.global_step, resumed_step);
  if (now.step_seconds > 0) g.step_seconds = now.step_seconds;
  g.slowest_checkpoint_seconds = std::max(before.slowest_checkpoint_seconds, now.slowest_checkpoint_seconds);
  g.wall_seconds = wall_seconds;
  g.ratio = wall_seconds > 0 ? std::clamp(g.seconds.training / wall_seconds, 0.0, 1.0) : 0;
  g.update_time = now_rfc3339;
  return g;
}

}  // namespace torus::controller

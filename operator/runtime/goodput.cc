#include "operator/runtime/goodput.h"

#include <algorithm>
#include <cmath>

#include "common/process/worker_events.h"

namespace torus::runtime {
namespace {

double seconds_between(LedgerClock::time_point a, LedgerClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t step_of(const nlohmann::json& e, int64_t fallback) {
  auto it = e.find("step");
  if (it == e.end()) it = e.find("resumed_step");
  return it != e.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

// Steps a gang that was last heard of `quiet_s` ago may have made since: progress events come at most every 0.5 s,
// and a gang that went quiet for longer than a second is hung, not stepping.
constexpr double kMaxQuietSeconds = 1.0;

}  // namespace

void GoodputLedger::on_attempt_start(int attempt, LedgerClock::time_point now) {
  attempts_.push_back(Attempt{.number = attempt, .start = now, .heard_at = now});
}

void GoodputLedger::on_event(int rank, const nlohmann::json& e, LedgerClock::time_point now) {
  if (attempts_.empty()) on_attempt_start(0, now);
  Attempt& a = *current();
  const std::string type = e.value("event", "");
  if (type == process::event::kAborted) {  // a survivor's last words: exactly where the gang was
    a.aborted_step = std::max(a.aborted_step.value_or(0), step_of(e, 0));
    return;
  }
  if (a.failed_at) return;  // what a dying gang says after its first failure changes nothing else
  if (type == process::event::kProgress || type == process::event::kCheckpoint) {
    const int64_t step = step_of(e, a.heard_step);
    if (step >= a.heard_step) {
      a.heard_step = step;
      a.heard_at = now;
    }
  }
  if (rank != 0) return;
  if (e.contains("ledger")) a.latest = process::rank_ledger_from_json(e["ledger"]);
  if (type == process::event::kStarted) {
    a.saved_step = a.heard_step = step_of(e, 0);
    a.saved_at = a.heard_at = now;
    a.at_checkpoint = a.latest;
    if (!first_training_) first_training_ = now;
  } else if (type == process::event::kCheckpoint) {
    a.saved_step = step_of(e, a.saved_step);
    a.saved_at = now;
    a.at_checkpoint = a.latest;
  } else if (type == process::event::kEvaluated && !time_to_target_s_ && e.contains("time_to_target_s") &&
             first_training_) {
    time_to_target_s_ = seconds_between(*first_training_, now);
  }
}

void GoodputLedger::on_failure(LedgerClock::time_point now) {
  Attempt* a = current();
  if (a != nullptr && !a->failed_at) a->failed_at = now;
}

double GoodputLedger::recent_step_seconds(const Attempt& a) { return a.latest.step_time(); }

int64_t GoodputLedger::reached_step_of(const Attempt& a) {
  if (a.aborted_step) return std::max(*a.aborted_step, a.saved_step);
  const double step_s = recent_step_seconds(a);
  const double quiet = std::min(seconds_between(a.heard_at, *a.failed_at), kMaxQuietSeconds);
  const int64_t since_heard = step_s > 0 ? std::llround(quiet / step_s) : 0;
  return std::max(a.heard_step + since_heard, a.saved_step);
}

JobGoodput GoodputLedger::totals(LedgerClock::time_point end) const {
  JobGoodput g;
  if (attempts_.empty()) return g;
  g.wall_s = seconds_between(attempts_.front().start, end);
  for (const Attempt& a : attempts_) {
    if (a.latest.steps > 0) g.step_s = recent_step_seconds(a);
    // A failed attempt keeps what its last checkpoint saved; the rest of its training is redone by the next one.
    const bool lost = a.failed_at && a.saved_at;
    const process::RankLedger& kept = lost ? a.at_checkpoint : a.latest;
    for (process::TimePart p : process::kAllTimeParts) g.kept[p] += kept[p];
    g.kept.comm_init_s += kept.comm_init_s;
    g.kept.steps += kept.steps;
    g.kept.step_seconds += kept.step_seconds;
    if (lost) {
      const AttemptLoss loss{a.number, a.saved_step, reached_step_of(a), recent_step_seconds(a)};
      g.lost_steps += loss.reached_step - loss.saved_step;
      g.lost_work_s += static_cast<double>(loss.reached_step - loss.saved_step) * loss.step_s;
      g.losses.push_back(loss);
    }
  }
  double accounted = g.lost_work_s;
  for (process::TimePart p : process::kAllTimeParts) accounted += g.kept[p];
  g.restart_and_other_s = std::max(g.wall_s - accounted, 0.0);
  return g;
}

}  // namespace torus::runtime

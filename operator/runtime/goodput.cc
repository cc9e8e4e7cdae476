#include "operator/runtime/goodput.h"

#include <algorithm>
#include <cmath>

#include "common/process/worker_events.h"

namespace torus::runtime {
namespace {

double seconds_between(LedgerClock::time_point a, LedgerClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The rank's ledger an event carries (started, progress, checkpoint, finished), else null.
const process::RankLedger* ledger_of(const process::WorkerEvent& e) {
  return std::visit(
      [](const auto& x) -> const process::RankLedger* {
        if constexpr (requires { x.ledger; }) {
          return &x.ledger;
        } else {
          return nullptr;
        }
      },
      e);
}

// Steps a gang that was last heard of `quiet_s` ago may have made since: progress events come at most every 0.5 s,
// and a gang that went quiet for longer than a second is hung, not stepping.
constexpr double kMaxQuietSeconds = 1.0;

}  // namespace

void GoodputLedger::on_attempt_start(int attempt, LedgerClock::time_point now) {
  attempts_.push_back(Attempt{.number = attempt, .start = now, .heard_at = now});
}

void GoodputLedger::on_event(int rank, const process::WorkerEvent& e, LedgerClock::time_point now) {
  if (attempts_.empty()) on_attempt_start(0, now);
  Attempt& a = *current();
  if (const auto* aborted = std::get_if<process::AbortedEvent>(&e)) {  // a survivor's last words: where the gang was
    a.aborted_step = std::max(a.aborted_step.value_or(0), aborted->step);
    return;
  }
  if (a.failed_at) return;  // what a dying gang says after its first failure changes nothing else
  const auto* progress = std::get_if<process::ProgressEvent>(&e);
  const auto* checkpoint = std::get_if<process::CheckpointEvent>(&e);
  if (progress || checkpoint) {
    const int64_t step = progress ? progress->step : checkpoint->step;
    if (step >= a.heard_step) {
      a.heard_step = step;
      a.heard_at = now;
    }
  }
  if (rank != 0) return;
  if (const process::RankLedger* ledger = ledger_of(e)) a.latest = *ledger;
  if (const auto* started = std::get_if<process::StartedEvent>(&e)) {
    a.saved_step = a.heard_step = started->resumed_step;
    a.saved_at = a.heard_at = now;
    a.at_checkpoint = a.latest;
    if (!first_training_) first_training_ = now;
  } else if (checkpoint) {
    a.saved_step = checkpoint->step;
    a.saved_at = now;
    a.at_checkpoint = a.latest;
  } else if (const auto* evaluated = std::get_if<process::EvaluatedEvent>(&e);
             evaluated && !time_to_target_s_ && evaluated->time_to_target_s && first_training_) {
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

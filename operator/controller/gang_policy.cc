#include "operator/controller/gang_policy.h"

#include <algorithm>
#include <sstream>

#include "common/launch/exit_codes.h"
#include "common/process/worker_events.h"
#include "common/util/error.h"

namespace torus::controller {
namespace {

bool is_worker_retryable_code(const GangPolicy& policy, int code) {
  if (code == to_int(launch::ExitCode::kRetryable) || code == to_int(launch::ExitCode::kCollectiveTimeout)) return true;
  return std::find(policy.extra_retryable_codes.begin(), policy.extra_retryable_codes.end(), code) !=
         policy.extra_retryable_codes.end();
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string describe_exit(const WorkerState& w) {
  std::ostringstream os;
  os << w.name << " exited with code " << effective_exit_code(w).value_or(-1);
  if (w.term_signal) os << " (signal " << *w.term_signal << ")";
  if (!w.detail.empty()) os << " (" << w.detail << ")";
  return os.str();
}

// Failed workers of one class, in the order observed.
struct Failures {
  std::vector<const WorkerState*> permanent;
  std::vector<const WorkerState*> retryable;
  int succeeded = 0;
};

Failures collect_failures(const GangPolicy& policy, const GangObservation& gang) {
  Failures f;
  for (const auto& w : gang.workers) {
    auto code = effective_exit_code(w);
    if (!code) continue;
    switch (classify_exit(policy, *code)) {
      case ExitClass::kSuccess:
        ++f.succeeded;
        break;
      case ExitClass::kRetryable:
        f.retryable.push_back(&w);
        break;
      case ExitClass::kPermanent:
        f.permanent.push_back(&w);
        break;
    }
  }
  return f;
}

bool any_collective_timeout(const std::vector<const WorkerState*>& workers) {
  return std::any_of(workers.begin(), workers.end(), [](const WorkerState* w) {
    return effective_exit_code(*w) == to_int(launch::ExitCode::kCollectiveTimeout);
  });
}

Decision failure_decision(Reason reason, const std::vector<const WorkerState*>& workers, const std::string& prefix) {
  Decision d{Verdict::kFail, reason, prefix, {}, std::nullopt};
  std::vector<std::string> parts;
  for (const auto* w : workers) {
    d.culprits.push_back(w->name);
    parts.push_back(describe_exit(*w));
  }
  d.message += join(parts);
  return d;
}

bool any_checkpoint_lost(const std::vector<const WorkerState*>& workers) {
  return std::any_of(workers.begin(), workers.end(), [](const WorkerState* w) {
    return effective_exit_code(*w) == to_int(launch::ExitCode::kCheckpointLost);
  });
}

Decision decide_permanent(const GangPolicy& policy, const Failures& f) {
  if (any_checkpoint_lost(f.permanent)) {
    return failure_decision(Reason::kCheckpointLost, f.permanent,
                            "the attempt found no checkpoint to resume from, though one was written (deleted, or on "
                            "storage the pod does not mount): ");
  }
  // Under Never a collective timeout still fails, but the reason says what happened.
  Reason reason = policy.restart_policy == RestartPolicy::kNever && any_collective_timeout(f.permanent)
                      ? Reason::kCollectiveTimeout
                      : Reason::kWorkerFailed;
  return failure_decision(reason, f.permanent, "worker failed permanently: ");
}

// Whether the attempt's retryable failures began with disruptions (see Decision): some failed worker carries one,
// and every other failed worker exited at or after the first disruption (a follower: it stopped with the disrupted
// worker, or lost it). A follower with no exit time (vanished without a condition), or one that failed before, or a
// first disruption whose time is unknown while followers exist, makes the restart a failure.
bool began_with_disruptions(const std::vector<const WorkerState*>& failed) {
  std::optional<TimePoint> first;
  bool any = false;
  for (const WorkerState* w : failed) {
    if (!w->disruption) continue;
    any = true;
    if (w->disruption->since) first = first ? std::min(*first, *w->disruption->since) : *w->disruption->since;
  }
  if (!any) return false;
  return std::all_of(failed.begin(), failed.end(), [&](const WorkerState* w) {
    return w->disruption || (first && w->finished_at && *w->finished_at >= *first);
  });
}

std::string describe_disruption(const WorkerState& w) {
  std::string out = w.name;
  if (!w.disruption->node.empty()) out += " on node " + w.disruption->node;
  out += " was disrupted: " + (w.disruption->reason.empty() ? std::string("DisruptionTarget") : w.disruption->reason);
  if (!w.disruption->message.empty()) out += " (" + w.disruption->message + ")";
  return out;
}

// A restart for disruptions: no backoffLimit spent; the culprits are the disrupted workers, the followers are counted.
Decision disruption_decision(const GangObservation& gang, const std::vector<const WorkerState*>& failed) {
  Decision d{Verdict::kRestart, Reason::kDisrupted, {}, {}, std::nullopt};
  std::vector<std::string> parts;
  int followers = 0;
  for (const WorkerState* w : failed) {
    if (!w->disruption) {
      ++followers;
      continue;
    }
    d.culprits.push_back(w->name);
    parts.push_back(describe_disruption(*w));
  }
  d.message = join(parts);
  if (followers > 0) {
    d.message += "; " + std::to_string(followers) + (followers == 1 ? " peer" : " peers") + " stopped after it";
  }
  d.message += "; restarting the gang as attempt " + std::to_string(gang.attempt + 1) +
               " from its checkpoint (a disruption, not a failure: restarts and backoffLimit unchanged)";
  return d;
}

Decision decide_retryable(const GangPolicy& policy, const GangObservation& gang, const Failures& f) {
  if (began_with_disruptions(f.retryable)) return disruption_decision(gang, f.retryable);
  if (gang.restarts >= policy.backoff_limit) {
    std::ostringstream prefix;
    prefix << "backoff limit " << policy.backoff_limit << " reached after attempt " << gang.attempt << ": ";
    return failure_decision(Reason::kBackoffLimitExceeded, f.retryable, prefix.str());
  }
  Reason cause = any_collective_timeout(f.retryable) ? Reason::kCollectiveTimeout : Reason::kRetryableFailure;
  Decision d =
      failure_decision(cause, f.retryable, "restarting the gang as attempt " + std::to_string(gang.attempt + 1) + ": ");
  d.verdict = Verdict::kRestart;
  return d;
}

// Workers that are not running in this attempt: pending ones and ones that do not exist yet.
std::vector<std::string> not_running(const GangObservation& gang) {
  std::vector<std::string> names;
  for (const auto& w : gang.workers) {
    if (w.phase == PodPhase::kPending) names.push_back(w.detail.empty() ? w.name : w.name + " (" + w.detail + ")");
  }
  int missing = gang.expected_workers - static_cast<int>(gang.workers.size());
  if (missing > 0) names.push_back(std::to_string(missing) + " worker(s) never created");
  return names;
}

Seconds ceil_seconds(Clock::duration d) {
  auto s = std::chrono::ceil<Seconds>(d);
  return std::max(s, Seconds(0));
}

std::optional<Seconds> earlier(std::optional<Seconds> a, Seconds b) { return a ? std::min(*a, b) : b; }

}  // namespace

LastWords parse_last_words(const std::string& message, size_t max_chars) {
  LastWords words;
  words.reason = message.substr(0, std::min(message.find('\n'), max_chars));
  if (process::parse_event(words.reason)) words.reason.clear();  // a clean exit's message is its result, no reason
  std::istringstream lines(message);
  for (std::string line; std::getline(lines, line);) {
    const auto event = process::parse_event(line);
    if (const auto* aborted = event ? std::get_if<process::AbortedEvent>(&*event) : nullptr) words.step = aborted->step;
    if (const auto* finished = event ? std::get_if<process::FinishedEvent>(&*event) : nullptr)
      words.finished = *finished;
  }
  return words;
}

const char* to_string(Reason reason) {
  switch (reason) {
    case Reason::kNone:
      return "";
    case Reason::kWorkerFailed:
      return "WorkerFailed";
    case Reason::kBackoffLimitExceeded:
      return "BackoffLimitExceeded";
    case Reason::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Reason::kGangTimeout:
      return "GangTimeout";
    case Reason::kCollectiveTimeout:
      return "CollectiveTimeout";
    case Reason::kRetryableFailure:
      return "RetryableFailure";
    case Reason::kCheckpointLost:
      return "CheckpointLost";
    case Reason::kDisrupted:
      return "Disrupted";
  }
  return "";
}

std::optional<int> effective_exit_code(const WorkerState& worker) {
  if (worker.exit_code) return worker.exit_code;
  if (worker.term_signal) return 128 + *worker.term_signal;
  if (worker.phase == PodPhase::kSucceeded) return 0;
  return std::nullopt;
}

ExitClass classify_exit(const GangPolicy& policy, int exit_code) {
  if (exit_code == 0) return ExitClass::kSuccess;
  // No restart brings a lost checkpoint back: under any policy the job fails, saying so.
  if (exit_code == to_int(launch::ExitCode::kCheckpointLost)) return ExitClass::kPermanent;
  switch (policy.restart_policy) {
    case RestartPolicy::kNever:
      return ExitClass::kPermanent;
    case RestartPolicy::kOnFailure:
      return ExitClass::kRetryable;
    case RestartPolicy::kExitCode:
      break;
  }
  // Signals (128+n, e.g. 137 for SIGKILL/OOM) and codes above are the platform's doing, not the program's.
  if (exit_code >= 128 || exit_code < 0) return ExitClass::kRetryable;
  return is_worker_retryable_code(policy, exit_code) ? ExitClass::kRetryable : ExitClass::kPermanent;
}

Decision decide(const GangPolicy& policy, const GangObservation& gang) {
  Failures f = collect_failures(policy, gang);
  if (!f.permanent.empty()) return decide_permanent(policy, f);
  if (f.retryable.empty() && gang.expected_workers > 0 && f.succeeded >= gang.expected_workers) {
    return Decision{Verdict::kSucceed,
                    Reason::kNone,
                    "all " + std::to_string(f.succeeded) + " workers succeeded",
                    {},
                    std::nullopt};
  }
  std::optional<Seconds> recheck;
  if (policy.active_deadline) {
    TimePoint deadline = gang.job_start + *policy.active_deadline;
    if (gang.now >= deadline) {
      return Decision{Verdict::kFail,
                      Reason::kDeadlineExceeded,
                      "active deadline of " + std::to_string(policy.active_deadline->count()) + "s passed",
                      {},
                      std::nullopt};
    }
    recheck = ceil_seconds(deadline - gang.now);
  }
  if (!f.retryable.empty()) return decide_retryable(policy, gang, f);
  if (policy.running_deadline && !gang.running_since) {
    TimePoint deadline = gang.attempt_start + *policy.running_deadline;
    if (gang.now >= deadline) {
      Decision d{Verdict::kFail, Reason::kGangTimeout, {}, not_running(gang), std::nullopt};
      d.message = "gang did not reach Running within " + std::to_string(policy.running_deadline->count()) +
                  "s; never scheduled or started: " + join(d.culprits);
      return d;
    }
    recheck = earlier(recheck, ceil_seconds(deadline - gang.now));
  }
  return Decision{Verdict::kContinue, Reason::kNone, {}, {}, recheck};
}

GangPolicy gang_policy_of(const api::TrainingJobSpec& spec) {
  const auto& rp = spec.run_policy;
  GangPolicy g;
  g.restart_policy = rp.restart_policy.value_or(g.restart_policy);
  g.backoff_limit = rp.backoff_limit.value_or(g.backoff_limit);
  if (rp.active_deadline_seconds) g.active_deadline = Seconds(*rp.active_deadline_seconds);
  if (rp.running_deadline_seconds) g.running_deadline = Seconds(*rp.running_deadline_seconds);
  return g;
}

}  // namespace torus::controller

#pragma once
// The gang restart contract, shared by the operator (worker pods) and `torus run` (local processes).
//
// Pure functions: given the run policy and what the gang's workers did, decide whether the gang keeps going,
// restarts as a new attempt (every worker, from the last checkpoint), fails with a reason, or succeeded.
// No Kubernetes, no clocks: the caller passes `now` and the times it observed.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/process/worker_events.h"

namespace torus::controller {

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;
using Seconds = std::chrono::seconds;

// Which worker exits restart the gang: the job's spec.runPolicy.restartPolicy. kNever: any failure fails the job;
// kOnFailure: any failure restarts the gang; kExitCode: 128-255 and the worker's retryable codes restart, 1-127 fail.
using api::RestartPolicy;

// What a worker exit means for the gang under a restart policy.
enum class ExitClass { kSuccess, kRetryable, kPermanent };

// Why a gang restarted or failed; the names match the TrainingJob condition reasons.
enum class Reason {
  kNone,
  kWorkerFailed,          // a worker failed permanently (or under Never)
  kBackoffLimitExceeded,  // retryable failures used up the backoff limit
  kDeadlineExceeded,      // spec.runPolicy.activeDeadlineSeconds passed
  kGangTimeout,           // the gang did not reach Running within the scheduling deadline
  kCollectiveTimeout,     // a worker reported a collective that never finished
  kRetryableFailure,      // restart cause only: a retryable worker exit
  kCheckpointLost,        // the attempt should have resumed from a checkpoint and found none (exit 44)
  kDisrupted,             // restart cause only: the platform took workers away (eviction, preemption, drain)
};

const char* to_string(Reason reason);

// The run policy knobs the decision depends on.
struct GangPolicy {
  RestartPolicy restart_policy = RestartPolicy::kExitCode;
  int backoff_limit = 3;                    // restarts after failures allowed (one more needs restarts < limit)
  std::optional<Seconds> active_deadline;   // from the job's start (first attempt)
  std::optional<Seconds> running_deadline;  // from each attempt's start until every worker runs
  std::vector<int> extra_retryable_codes;   // besides ExitCode::kRetryable and kCollectiveTimeout
};

// A worker's lifecycle: the Kubernetes pod phase (minus Unknown); a local process maps onto it.
enum class PodPhase { kPending, kRunning, kSucceeded, kFailed };

// Why the platform took a worker away: a pod's `DisruptionTarget` condition (status True), which Kubernetes sets
// before it terminates a pod it evicts (reason EvictionByEvictionAPI: the eviction API, `kubectl drain`),
// preempts (PreemptionByScheduler), deletes for a NoExecute taint (DeletionByTaintManager), collects
// (DeletionByPodGC) or stops on a node under pressure or shutting down (TerminationByKubelet).
struct Disruption {
  std::string reason;              // the condition's reason
  std::string message;             // the condition's message
  std::string node;                // the node the worker ran on ("" when unknown)
  std::optional<TimePoint> since;  // the condition's lastTransitionTime
};

struct ContainerWaiting {
  std::string reason, message;
};

// One worker as observed (a pod's main container, or a local process).
struct WorkerState {
  std::string name;  // pod or process name, used in messages
  PodPhase phase = PodPhase::kPending;
  std::optional<int> exit_code;          // set when the worker exited
  std::optional<int> term_signal;        // a local process killed by a signal (counts as 128 + signal)
  std::string detail;                    // e.g. "OOMKilled", "Unschedulable: 0/3 nodes available"
  std::optional<int64_t> last_step;      // the last global step it finished, from its last words (parse_last_words)
  std::optional<Disruption> disruption;  // the platform took it away (as last seen, for a pod already gone)
  std::optional<TimePoint> finished_at;  // when it exited (the container's finishedAt), when known
  // A pending pod whose container the kubelet cannot start yet, and why (its waiting reason and message:
  // ImagePullBackOff, CreateContainerConfigError...; pods_waiting.h).
  std::optional<ContainerWaiting> waiting;
  std::optional<process::FinishedEvent> finished;  // rank 0's result, from its termination message
};

// A worker's termination message: the reason's first line (at most `max_chars`: what conditions quote) and the step
// it reached, from the `aborted` event a survivor of a failed collective writes under it (worker/app/telemetry.cc).
struct LastWords {
  std::string reason;
  std::optional<int64_t> step;
  // Rank 0's result when its run ended (the worker's `finished` event, written under its last words).
  std::optional<process::FinishedEvent> finished;
};
LastWords parse_last_words(const std::string& message, size_t max_chars);

// The gang as observed by the caller.
struct GangObservation {
  int expected_workers = 0;
  std::vector<WorkerState> workers;        // one per worker that exists in this attempt
  int attempt = 0;                         // 0-based: the first attempt is 0, the first restart 1
  int restarts = 0;                        // restarts after failures so far: the backoffLimit budget spent
                                           // (restarts for disruptions, reason kDisrupted, spend none)
  TimePoint job_start;                     // first attempt's start
  TimePoint attempt_start;                 // this attempt's start
  std::optional<TimePoint> running_since;  // when every worker of this attempt had reached Running
  TimePoint now;
};

enum class Verdict {
  kContinue,  // nothing to do yet; look again at `recheck_after` at the latest
  kRestart,   // tear the gang down and start attempt + 1
  kFail,      // the job failed for `reason`
  kSucceed,   // every worker succeeded
};

// A restart whose cause is a disruption (reason kDisrupted) is not a failure: it spends no backoffLimit, and the
// caller counts it apart (status.disruptions). It is one when the retryable failures of the attempt began with
// disruptions: every failed worker carries a Disruption, or exited (retryable) at or after the first disruption's
// time, as the peers of a worker taken away do (they agree to stop with it, or lose it in a collective). A worker
// that failed before the first disruption, or vanished without one, or any permanent failure, makes it a failure,
// as before. A disruption changes whom a restart is charged to, never whether the gang restarts: under Never it
// fails the job, as any failure does.
struct Decision {
  Verdict verdict = Verdict::kContinue;
  Reason reason = Reason::kNone;         // fail reason, or restart cause
  std::string message;                   // human text naming the workers involved
  std::vector<std::string> culprits;     // workers that caused the restart/failure
  std::optional<Seconds> recheck_after;  // the next deadline, when one applies
};

// The effective exit code: exit_code, or 128 + term_signal.
std::optional<int> effective_exit_code(const WorkerState& worker);
ExitClass classify_exit(const GangPolicy& policy, int exit_code);
Decision decide(const GangPolicy& policy, const GangObservation& gang);

// The policy of a (defaulted) job's spec.runPolicy: the one mapping, used by the operator and `torus run`.
GangPolicy gang_policy_of(const api::TrainingJobSpec& spec);

}  // namespace torus::controller

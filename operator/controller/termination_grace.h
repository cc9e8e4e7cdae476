#pragma once
// The worker pods' terminationGracePeriodSeconds, derived from what the job measured (issue 31.4). A pod deleted,
// evicted or preempted gets SIGTERM; every rank agrees to stop at the end of the step it is in, rank 0 writes a
// checkpoint of that step, and the ranks exit (worker/train/trainer_step.cc agree_to_stop). The grace must cover
// that, or the kubelet's SIGKILL lands in the save and the next attempt redoes the steps since the last periodic
// checkpoint. Pure: the planner asks it with the job's status when it makes an attempt's pods (children.cc).
#include <cstdint>
#include <optional>
#include <string>

#include "common/api/training_job.h"

namespace torus::controller {

// Nothing measured yet (the first attempt, or no save before a restart): Kubernetes' own default, said explicitly.
inline constexpr int64_t kUnmeasuredGraceSeconds = 30;
// Never below this once measured: signal delivery, the process's exit and a loaded node's scheduling delays are
// seconds that no figure of the job measures.
inline constexpr int64_t kGraceFloorSeconds = 10;
// The measured need is doubled (a save slowed by a busy disk or a peer's step slowed by contention) and then...
inline constexpr double kGraceMarginFactor = 2.0;
// ...this added: the stop agreement's all-reduce, the process's exit and log flushing.
inline constexpr int64_t kGraceSlackSeconds = 5;

// What the job measured so far (status.goodput and status.progress); 0 where nothing was measured.
struct GraceInputs {
  double step_seconds = 0;        // rank 0's mean step time (status.goodput.stepSeconds)
  double save_seconds = 0;        // the slowest checkpoint save (status.goodput.slowestCheckpointSeconds)
  double evaluation_seconds = 0;  // one evaluation pass: status.goodput.seconds.evaluation / completed epochs
};

GraceInputs grace_inputs(const api::TrainingJobStatus& status);

// The grace in whole seconds. The worst case is a SIGTERM just as an epoch's evaluation begins: the evaluation runs
// on, then the epoch's checkpoint, then one more step (the stop agreement rides on a step), then the stop's save:
// need = evaluation + step + 2 x save. Grace = max(floor, ceil(margin x need) + slack); kUnmeasuredGraceSeconds
// until both a step time and a save were measured.
int64_t derive_termination_grace(const GraceInputs& in);

// spec.gang.template.spec.terminationGracePeriodSeconds, when the user set one (an integer >= 0). It wins over the
// derived value: the user may know a slower store than the job has met so far, or want a drained node back sooner.
std::optional<int64_t> user_termination_grace(const api::TrainingJob& job);

// The grace an attempt's pods get: the user's, else the derived one from the job's status now.
int64_t termination_grace_for(const api::TrainingJob& job);
// Where that grace came from, for the pod's torus.dev/termination-grace annotation (`kubectl describe pod` tells
// why the pod waits that long): "spec.gang.template", "unmeasured", or "step S s, save V s, evaluation E s" with
// the inputs in shortest round-trip form (the tests derive the pod's value from them again).
std::string describe_grace(const api::TrainingJob& job);

}  // namespace torus::controller

#pragma once
// Spec edits and attempts, one contract. An attempt of the gang (the first start, a restart after a failure, a resume
// after suspend, or an edit) runs the spec of the moment it started: the job's ConfigMap is rewritten with it before
// the attempt's pods are created, and every pod carries the fingerprint of the spec it was built from. An edit of that
// spec while the gang has pods is applied as a new attempt from the last checkpoint: never a worker failure, never
// counted against backoffLimit. The runPolicy fields the operator reads on every pass (kLiveRunPolicyFields) take
// effect at once and start no attempt. Pure functions, no I/O.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/api/training_job.h"

namespace torus::controller {

using json = nlohmann::json;

// spec.runPolicy fields that apply at once to the running attempt (the planner reads them on every pass).
inline constexpr const char* kLiveRunPolicyFields[] = {"suspend",
                                                       "backoffLimit",
                                                       "activeDeadlineSeconds",
                                                       "runningDeadlineSeconds",
                                                       "ttlSecondsAfterFinished",
                                                       "cleanPodPolicy",
                                                       "restartPolicy",
                                                       "managedBy"};

// The part of a defaulted spec (as the codec writes it) that an attempt is bound to: all of it but the live fields.
json attempt_spec(const json& spec);

// A stable fingerprint of attempt_spec(spec): FNV-1a 64 of its compact JSON (keys sorted), 16 hex digits.
std::string attempt_spec_hash(const json& spec);

// Where two specs' attempt parts differ, as "spec.gang.workers: 2 -> 3" (leaf paths in key order; a value missing on
// one side reads "unset"); at most `limit` entries, then "... and N more".
std::vector<std::string> changed_fields(const json& before, const json& after, size_t limit = 4);

// An edit of the model or the seed changes what a checkpoint must fit (the parameters' shapes; the data order and
// initial weights a resumed run continues), so the job's next attempt is a new run from step 0 rather than one that
// fails to restore until backoffLimit. `before`, `after`: defaulted specs as the codec writes them.
bool edit_starts_a_new_run(const json& before, const json& after);
// Where the attempt after an edit from `before` (the running attempt's spec; null: unknown) starts, in words for its
// event: " from the last checkpoint", or, when the edit starts a new run, " as a new run <run> from step 0 (...)"
// with status.run set to it and status.lastCheckpoint (the old run's) cleared.
std::string start_after_edit(api::TrainingJobStatus& status, const api::TrainingJob& job, const json& before);
// The run the job trains as (common/launch/checkpoint_layout.h): status.run, else the job's uid.
std::string run_of(const api::TrainingJob& job);
// The run an edit of generation `generation` starts: "<uid>-g<generation>".
std::string new_run_for_edit(const api::TrainingJob& job);

}  // namespace torus::controller

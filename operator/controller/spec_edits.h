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

}  // namespace torus::controller

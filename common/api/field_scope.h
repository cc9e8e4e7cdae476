#pragma once
// Where a spec field acts. Most act in the worker, which reads the job file either launcher gives it; these act only
// where the operator makes pods, a PodGroup, a Service or the job's own lifecycle, so `torus run`, which runs
// processes on this machine, has nothing to apply them to and says once which of them a job sets.
// tests/conformance/fields.h (each field's launchers and the test of its effect) agrees with this list: its test
// fails when they differ. spec.runPolicy.managedBy is the operator's too, but `torus run` reads it (it refuses a job
// another controller runs), so it is not in this list.
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace torus::api {

inline constexpr std::array<std::string_view, 16> kOperatorOnlyFields = {
    "spec.gang.image",
    "spec.gang.resources",
    "spec.gang.template",
    "spec.training.checkpoint.volumeClaimTemplate",
    "spec.runPolicy.runningDeadlineSeconds",
    "spec.runPolicy.ttlSecondsAfterFinished",
    "spec.runPolicy.cleanPodPolicy",
    "spec.runPolicy.schedulingPolicy.schedulerName",
    "spec.runPolicy.schedulingPolicy.podGroup",
    "spec.runPolicy.schedulingPolicy.minAvailable",
    "spec.runPolicy.schedulingPolicy.queue",
    "spec.runPolicy.schedulingPolicy.priorityClass",
    "spec.runPolicy.topology.key",
    "spec.runPolicy.topology.placement",
    "spec.metricsPort",
    "spec.rendezvousPort",
};

// The operator-only fields `document` (a TrainingJob as written, before defaults) sets, in kOperatorOnlyFields'
// order.
std::vector<std::string> operator_only_fields_set(const nlohmann::json& document);

}  // namespace torus::api

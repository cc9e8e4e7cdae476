#pragma once
// Defaulting: fills every unset spec field that has a default (docs/trainingjob.md lists them). Pure and
// idempotent: apply it before validation and before reading the spec; it never overrides what the user gave.
#include <string_view>

#include "common/api/training_job.h"

namespace torus::api {

inline constexpr std::string_view kDefaultWorkerImage = "ghcr.io/torus-dev/torus-worker:0.1.0";
inline constexpr std::string_view kDefaultManagedBy = "torus.dev/operator";
inline constexpr std::string_view kFashionMnistPath = "/usr/share/datasets/fashion-mnist";
inline constexpr int32_t kDefaultMetricsPort = 9090;
inline constexpr int32_t kDefaultRendezvousPort = 29500;

void apply_defaults(TrainingJob& job);
void apply_defaults(TrainingJobSpec& spec);
TrainingJob with_defaults(TrainingJob job);

}  // namespace torus::api

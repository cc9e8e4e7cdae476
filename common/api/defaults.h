#pragma once
// Defaulting: fills every unset spec field that has a default (docs/trainingjob.md lists them). Pure and
// idempotent: apply it before validation and before reading the spec; it never overrides what the user gave.
#include <string>
#include <string_view>

#include "common/api/training_job.h"

namespace torus::api {

inline constexpr std::string_view kDefaultWorkerImage = "ghcr.io/torus-dev/torus-worker:0.1.0";
// The GPU worker image's tag is the CPU one's with this suffix (scripts/images-gpu.sh builds it: the CUDA major the
// node's driver must support).
inline constexpr std::string_view kGpuImageTagSuffix = "-cuda13";
// The worker image a job of `device` runs when its spec names none: `cpu_image` (the operator's --worker-image, else
// kDefaultWorkerImage), with kGpuImageTagSuffix for device gpu.
std::string default_worker_image(Device device, std::string_view cpu_image = kDefaultWorkerImage);
inline constexpr std::string_view kDefaultManagedBy = "torus.dev/operator";
inline constexpr std::string_view kFashionMnistPath = "/usr/share/datasets/fashion-mnist";
inline constexpr int32_t kDefaultMetricsPort = 9090;
inline constexpr int32_t kDefaultRendezvousPort = 29500;

void apply_defaults(TrainingJob& job);
void apply_defaults(TrainingJobSpec& spec);
TrainingJob with_defaults(TrainingJob job);

}  // namespace torus::api

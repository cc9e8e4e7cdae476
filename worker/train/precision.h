#pragma once
// spec.training.precision -> what the engine does with it: the dtype of the layers' activations and whether fp16's
// dynamic loss scaling runs. One pure function, so the trainer (which acts on it), rank 0's effective-configuration
// line (which shows it) and the tests agree. fp32 master weights, gradients and optimizer state in every case.
#include <cstdint>
#include <string>

#include "common/api/training_job.h"
#include "worker/backend/backend.h"

namespace torus::worker::train {

enum class LossScaling : uint8_t { kOff, kDynamic };

struct PrecisionPlan {
  api::Precision precision = api::Precision::kFp32;
  DType activations = DType::kF32;
  // fp16 only: its 5-bit exponent underflows small gradients unless the loss is scaled up first (bf16 has fp32's
  // range). The job spec has no knobs for it: the defaults (kmath::LossScaleConfig, PyTorch GradScaler's) apply.
  LossScaling loss_scaling = LossScaling::kOff;
  LossScaleConfig loss_scale;
};

PrecisionPlan precision_plan(api::Precision precision);

// "bf16 (activations bf16, fp32 master weights, no loss scaling)"; fp16 names its loss-scale schedule.
std::string describe(const PrecisionPlan& plan);

// Throws InvalidArgument naming training.precision when `backend` cannot run the plan's activations: a job never
// trains in another precision than it asked for.
void check_supported(const PrecisionPlan& plan, const Backend& backend);

}  // namespace torus::worker::train

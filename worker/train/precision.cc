#include "worker/train/precision.h"

#include <cstdio>

#include "common/util/error.h"

namespace torus::worker::train {

PrecisionPlan precision_plan(api::Precision precision) {
  PrecisionPlan plan;
  plan.precision = precision;
  switch (precision) {
    case api::Precision::kFp32:
      break;
    case api::Precision::kBf16:
      plan.activations = DType::kBF16;
      break;
    case api::Precision::kFp16:
      plan.activations = DType::kF16;
      plan.loss_scaling = LossScaling::kDynamic;
      break;
  }
  return plan;
}

std::string describe(const PrecisionPlan& plan) {
  std::string out = std::string(api::to_string(plan.precision)) + " (activations " + dtype_name(plan.activations) +
                    ", fp32 master weights, ";
  if (plan.loss_scaling == LossScaling::kOff) return out + "no loss scaling)";
  const LossScaleConfig& c = plan.loss_scale;
  char text[192];
  std::snprintf(text, sizeof text,
                "dynamic loss scaling: initial %g, x%g after %d finite steps, x%g and the step skipped on inf/NaN, "
                "within [%g, %g])",
                static_cast<double>(c.init_scale), static_cast<double>(c.growth_factor), c.growth_interval,
                static_cast<double>(c.backoff_factor), static_cast<double>(c.min_scale),
                static_cast<double>(c.max_scale));
  return out + text;
}

void check_supported(const PrecisionPlan& plan, const Backend& backend) {
  if (backend.supports_activations(plan.activations)) return;
  throw InvalidArgument("training.precision: " + std::string(api::to_string(plan.precision)) + " needs " +
                        dtype_name(plan.activations) + " activations, which the " + backend.name() +
                        " backend does not run (the CPU engine trains in fp32; use gang.device: gpu)");
}

}  // namespace torus::worker::train

// spec.training.precision -> the engine's plan: dtype per precision, fp16's loss-scale schedule (the kmath state
// machine the GPU runs, executed here), and the refusal on a backend without half activations.
#include "worker/train/precision.h"

#include <gtest/gtest.h>

#include <string>

#include "common/util/error.h"
#include "tests/worker/recording_backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/kernel_math.h"

namespace torus::worker::train {
namespace {

TEST(Precision, EachPrecisionPicksItsActivationsAndOnlyFp16ScalesTheLoss) {
  const PrecisionPlan fp32 = precision_plan(api::Precision::kFp32);
  EXPECT_EQ(fp32.activations, DType::kF32);
  EXPECT_EQ(fp32.loss_scaling, LossScaling::kOff);
  const PrecisionPlan bf16 = precision_plan(api::Precision::kBf16);
  EXPECT_EQ(bf16.activations, DType::kBF16);
  EXPECT_EQ(bf16.loss_scaling, LossScaling::kOff) << "bf16 has fp32's exponent range";
  const PrecisionPlan fp16 = precision_plan(api::Precision::kFp16);
  EXPECT_EQ(fp16.activations, DType::kF16);
  EXPECT_EQ(fp16.loss_scaling, LossScaling::kDynamic);
}

TEST(Precision, Fp16ScheduleBacksOffOnOverflowAndGrowsAfterTheIntervalWithinItsBounds) {
  const LossScaleConfig c = precision_plan(api::Precision::kFp16).loss_scale;
  LossScaleState s = cuda::kmath::loss_scale_initial(c);
  EXPECT_EQ(s.scale, 65536.0f);
  s.found_inf = 1;  // an overflowed step
  cuda::kmath::loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_EQ(s.found_inf, 0) << "the next step starts unflagged";
  for (int i = 0; i < c.growth_interval - 1; ++i) cuda::kmath::loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 32768.0f) << "one finite step short of the interval";
  cuda::kmath::loss_scale_update(s, c);
  EXPECT_EQ(s.scale, 65536.0f);
  EXPECT_EQ(s.good_steps, 0);
  // Repeated overflows stop at min_scale; repeated growth at max_scale.
  for (int i = 0; i < 40; ++i) {
    s.found_inf = 1;
    cuda::kmath::loss_scale_update(s, c);
  }
  EXPECT_EQ(s.scale, c.min_scale);
  EXPECT_EQ(s.skipped, 41);
  for (int i = 0; i < 40 * c.growth_interval; ++i) cuda::kmath::loss_scale_update(s, c);
  EXPECT_EQ(s.scale, c.max_scale);
}

TEST(Precision, ABackendWithoutHalfActivationsIsRefusedNamingTheField) {
  auto cpu = cpu::make_cpu_backend(1);
  EXPECT_NO_THROW(check_supported(precision_plan(api::Precision::kFp32), *cpu));
  try {
    check_supported(precision_plan(api::Precision::kBf16), *cpu);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("training.precision: bf16 needs bf16 activations"), std::string::npos) << what;
  }
  EXPECT_THROW(check_supported(precision_plan(api::Precision::kFp16), *cpu), InvalidArgument);
  testing::RecordingBackend half_capable;
  EXPECT_NO_THROW(check_supported(precision_plan(api::Precision::kFp16), half_capable));
}

TEST(Precision, TheDescriptionNamesDtypeMastersAndScaling) {
  EXPECT_EQ(describe(precision_plan(api::Precision::kBf16)),
            "bf16 (activations bf16, fp32 master weights, no loss scaling)");
  EXPECT_NE(describe(precision_plan(api::Precision::kFp16)).find("dynamic loss scaling: initial 65536"),
            std::string::npos);
}

}  // namespace
}  // namespace torus::worker::train

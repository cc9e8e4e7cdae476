// The CPU backend's primitive builders (worker/backend/cpu/plans.h), run as oneDNN primitives on small inputs.
#include "worker/backend/cpu/plans.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/util/error.h"

namespace torus::worker::cpu {
namespace {

TEST(Plans, TheAddPlanAddsAndAppliesItsActivation) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<float> a = {1, -2, 3, -4, 0.5f}, b = {1, 1, -5, 2, -0.5f}, y(5);
  for (Activation act : {Activation::kNone, Activation::kRelu}) {
    dnnl::binary add = make_add_plan(engine, 5, act);
    dnnl::memory ma(flat_desc(5), engine, a.data()), mb(flat_desc(5), engine, b.data()),
        my(flat_desc(5), engine, y.data());
    add.execute(stream, {{DNNL_ARG_SRC_0, ma}, {DNNL_ARG_SRC_1, mb}, {DNNL_ARG_DST, my}});
    stream.wait();
    for (size_t i = 0; i < y.size(); ++i) {
      const float sum = a[i] + b[i];
      EXPECT_EQ(y[i], act == Activation::kRelu && sum < 0 ? 0.0f : sum) << i;
    }
  }
}

TEST(Plans, APoolWhoseWindowDoesNotFitIsRefusedWithTheInputShape) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const PoolGeometry g{2, 1, 1, 8, PoolKind::kMax, 3, 3, 3, 0};  // a 3x3 window over a 1x1 image, no padding
  try {
    make_pool_plan(engine, g);
    FAIL() << "a 1x1 input took a 3x3 window";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("pool: input " + g.input_shape().str() + " too small"), std::string::npos)
        << e.what();
  }
  const PoolGeometry fits{2, 4, 4, 8, PoolKind::kMax, 2, 2, 2, 0};
  const PoolPlan p = make_pool_plan(engine, fits);
  EXPECT_EQ(p.fwd_pd.dst_desc(), nhwc_desc(2, 2, 2, 8)) << "NHWC in, NHWC out";
}

}  // namespace
}  // namespace torus::worker::cpu

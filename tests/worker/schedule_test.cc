// Learning-rate schedules: the recipes' shapes, steps as two points at one epoch, and the points refused.
#include "worker/optim/schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "common/util/error.h"

namespace torus::worker {
namespace {

TEST(Schedule, WarmupThenLinearDecay) {
  const auto s = optim::LrSchedule::warmup_then_linear_decay(0.2, 0.2, 4.0);
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(0.4), 0.1);
  EXPECT_DOUBLE_EQ(s.at(0.8), 0.2);
  EXPECT_NEAR(s.at(2.4), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.at(4.0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(9.0), 0.0);
}

TEST(Schedule, OneCycleAndSteps) {
  const auto one = optim::LrSchedule::one_cycle(1.0, 10, 0.3, 10, 100);
  EXPECT_DOUBLE_EQ(one.at(0), 0.1);
  EXPECT_DOUBLE_EQ(one.at(3), 1.0);
  EXPECT_DOUBLE_EQ(one.at(10), 0.01);
  // Two points at one epoch make a step (the TrainingJob's piecewise-linear convention).
  const optim::LrSchedule step({{0, 0.1}, {2, 0.1}, {2, 0.01}, {4, 0.01}});
  EXPECT_DOUBLE_EQ(step.at(1.99), 0.1);
  EXPECT_DOUBLE_EQ(step.at(2.0), 0.01);
  EXPECT_DOUBLE_EQ(step.at(3.0), 0.01);
}

TEST(Schedule, BadPointsAreRefusedNamingThePoint) {
  try {
    optim::LrSchedule({{0, 0.1}, {2, 0.2}, {1, 0.3}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("point 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(optim::LrSchedule({{0, -1.0}}), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker

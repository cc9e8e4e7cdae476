// The rates every reader derives alike (common/metrics/rates.h).
#include "common/metrics/rates.h"

#include <gtest/gtest.h>

namespace torus::metrics {
namespace {

TEST(Rates, TheGangMovesAtWorldTimesARanksPace) {
  EXPECT_DOUBLE_EQ(gang_images_per_second(640, 4), 2560);
  EXPECT_DOUBLE_EQ(gang_images_per_second(640, 0), 640) << "an unknown world is one rank";
}

TEST(Rates, TheEtaIsTheStepsLeftAtTheStepTimeAndUnknownWithoutOne) {
  EXPECT_DOUBLE_EQ(*eta_seconds(64, 200, 0.05), 6.8);
  EXPECT_DOUBLE_EQ(*eta_seconds(250, 200, 0.05), 0) << "past the plan: none left";
  EXPECT_EQ(eta_seconds(64, 200, 0), std::nullopt);
  EXPECT_DOUBLE_EQ(seconds_per_step(256, 1024), 0.25);
  EXPECT_DOUBLE_EQ(seconds_per_step(256, 0), 0);
}

TEST(Rates, BusBandwidthIsNcclTestsDefinition) {
  // 1 GB in 1 s over 4 ranks: algorithm bandwidth 1 GB/s, bus bandwidth 2 x 3/4 of it.
  EXPECT_DOUBLE_EQ(bus_bandwidth(1e9, 1.0, 4), 1.5e9);
  EXPECT_DOUBLE_EQ(bus_bandwidth(1e9, 1.0, 1), 0) << "one rank moves nothing";
  EXPECT_DOUBLE_EQ(bus_bandwidth(1e9, 0, 4), 0);
}

}  // namespace
}  // namespace torus::metrics

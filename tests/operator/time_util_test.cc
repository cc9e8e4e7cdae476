// RFC 3339 times as Kubernetes writes them, to and from system_clock.
#include "operator/controller/time_util.h"

#include <gtest/gtest.h>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using testing::at;

TEST(TimeUtil, RoundTrip) {
  EXPECT_EQ(parse_time(format_time(at(42))), at(42));
  EXPECT_EQ(parse_time("2026-11-22T06:00:00.123Z"), parse_time("2026-11-22T06:00:00Z"));
  EXPECT_EQ(parse_time("2026-11-22T08:00:00+02:00"), parse_time("2026-11-22T06:00:00Z"));
  EXPECT_EQ(parse_time("yesterday"), std::nullopt);
}

}  // namespace
}  // namespace torus::controller

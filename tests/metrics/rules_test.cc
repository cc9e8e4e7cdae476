// The alerting rules: `promtool check rules` accepts them and `promtool test rules` proves each alert fires on a
// series built to trip it and stays silent on a healthy one (tests/metrics/rules_test.yaml).
#include <gtest/gtest.h>

#include <string>

#include "tests/metrics/prometheus_fixture.h"

namespace torus::metrics {
namespace {

const std::string kSource = TORUS_SOURCE_DIR;

TEST(AlertingRules, PromtoolChecksThem) {
  const auto result = testing::run_command(std::string(testing::kPromtoolBinary) + " check rules " + kSource +
                                           "/dashboards/alerts/torus-rules.yaml");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS: 5 rules found"), std::string::npos) << result.output;
}

TEST(AlertingRules, EachAlertFiresAndStaysSilentWhenItShould) {
  const auto result = testing::run_command(std::string(testing::kPromtoolBinary) + " test rules " + kSource +
                                           "/tests/metrics/rules_test.yaml");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace torus::metrics

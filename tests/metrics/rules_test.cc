// The alerting rules: `promtool check rules` accepts them and `promtool test rules` proves each alert fires on a
// series built to trip it and stays silent on a healthy one (tests/metrics/rules_test.yaml).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
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

std::string read(const std::string& path) {
  std::ifstream in(kSource + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The names common/metrics/metric_names.h declares: the one place they are spelled (the worker and the operator
// register and read them from there, the dashboards' generator refuses others).
std::set<std::string> declared_metrics() {
  const std::string header = read("common/metrics/metric_names.h");
  static const std::regex kName(R"re(inline constexpr char k\w+\[\] =\s*"(torus_[a-z0-9_]+)";)re");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), kName); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

// A rule, or a rule's test series, that reads a name no code exposes would never fire: every name they use is
// declared (a histogram's _bucket/_sum/_count by its name).
TEST(AlertingRules, ReadOnlyMetricsTheCodeDeclares) {
  const std::set<std::string> declared = declared_metrics();
  ASSERT_GT(declared.size(), 50u) << "the parse of metric_names.h found too few names";
  for (const char* file : {"dashboards/alerts/torus-rules.yaml", "tests/metrics/rules_test.yaml"}) {
    const std::string text = read(file);
    ASSERT_FALSE(text.empty()) << file;
    static const std::regex kUsed(R"(\btorus_(?:worker|operator)_[a-z0-9_]+)");
    int used = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kUsed); it != std::sregex_iterator(); ++it, ++used) {
      std::string name = it->str();
      for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
        if (name.ends_with(suffix) && declared.count(name.substr(0, name.size() - suffix.size())))
          name.resize(name.size() - suffix.size());
      }
      EXPECT_TRUE(declared.count(name)) << file << " reads " << it->str() << ", which metric_names.h does not declare";
    }
    EXPECT_GT(used, 0) << file;
  }
}

}  // namespace
}  // namespace torus::metrics

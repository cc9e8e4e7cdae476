// The operator's metric catalog: its helpers count right and `promtool check metrics` finds nothing to say.
#include "common/metrics/operator_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/metrics/prometheus_fixture.h"

namespace torus::metrics {
namespace {

std::string describe(const testing::ToolResult& r) { return "exit " + std::to_string(r.exit_code) + ":\n" + r.output; }

TEST(OperatorMetrics, PromtoolCleanAndHelpersCountRight) {
  Registry registry;
  OperatorMetrics m(registry, "0.1.0");
  m.reconciles.inc(3);
  m.reconcile_errors.labels({"api"}).inc();
  m.reconcile_seconds.observe(0.004);
  m.gang_restarts.labels({"team-a", "fashion", "pod_failed"}).inc();
  m.time_to_running.labels({"team-a"}).observe(12);
  m.time_to_first_step.labels({"team-a"}).observe(20);
  m.straggler_slowdown.labels({"team-a", "fashion"}).set(1.62);
  m.straggler_rank.labels({"team-a", "fashion"}).set(1);
  m.leader.set(1);
  m.workqueue_depth.set(2);
  m.record_api_request("get", 200);
  m.record_api_request("patch", 409);
  m.record_api_request("watch", 0);
  EXPECT_EQ(m.api_requests.labels({"get", "200"}).value(), 1);
  EXPECT_EQ(m.api_request_errors.labels({"patch", "409"}).value(), 1);
  EXPECT_EQ(m.api_request_errors.labels({"watch", "error"}).value(), 1);
  EXPECT_EQ(m.api_request_errors.labels({"get", "200"}).value(), 0);

  m.set_jobs_by_phase({{{"team-a", "Running"}, 2}, {{"team-a", "Pending"}, 1}});
  m.set_jobs_by_phase({{{"team-a", "Running"}, 3}});
  EXPECT_EQ(m.jobs.labels({"team-a", "Running"}).value(), 3);
  EXPECT_EQ(m.jobs.labels({"team-a", "Pending"}).value(), 0);  // gone from the listing: zeroed, not stale

  const std::string text = registry.expose();
  const auto result = testing::promtool_check_metrics(text);
  EXPECT_EQ(result.exit_code, 0) << describe(result) << "\n" << text;
  EXPECT_EQ(result.output, "") << describe(result);
}

}  // namespace
}  // namespace torus::metrics

// A real Prometheus server (Debian's) scrapes an exporter running in this process; the samples must arrive.
#include <gtest/gtest.h>

#include "common/metrics/http_exporter.h"
#include "common/metrics/worker_metrics.h"
#include "common/util/error.h"
#include "tests/metrics/prometheus_fixture.h"

namespace torus::metrics {
namespace {

using namespace std::chrono_literals;

TEST(PrometheusScrape, WorkerSamplesArriveWithTheirLabels) {
  Registry registry;
  WorkerMetrics worker(registry, "scrape-job", "team-a", 1, 2);
  worker.loss.set(0.5);
  worker.record_step({.step = 0.25, .data_wait = 0.01, .compute = 0.2, .comm_wait = 0.03}, 32);
  HttpExporter exporter(registry, {});
  testing::PrometheusServer prometheus({.targets = {"127.0.0.1:" + std::to_string(exporter.port())}});

  // The first scrape lands about one scrape interval after start; allow for a loaded 2-core CI machine.
  const auto loss = prometheus.wait_for_series("torus_worker_loss{job=\"scrape-job\",rank=\"1\"}", 60s);
  ASSERT_EQ(loss.size(), 1u) << "no sample within the deadline; prometheus log:\n" << prometheus.recent_log();
  EXPECT_EQ(loss[0]["metric"]["namespace"], "team-a");  // honor_labels keeps our namespace and job
  EXPECT_EQ(loss[0]["metric"]["attempt"], "2");
  EXPECT_EQ(loss[0]["value"][1], "0.5");

  // A later value shows up in a later scrape.
  worker.loss.set(0.25);
  const auto updated = prometheus.wait_for_series("torus_worker_loss{job=\"scrape-job\"} == 0.25", 60s);
  EXPECT_EQ(updated.size(), 1u) << prometheus.recent_log();

  const auto buckets = prometheus.query("sum(torus_worker_step_seconds_count{job=\"scrape-job\"})");
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0]["value"][1], "1");
}

TEST(PrometheusScrape, ABadExpressionIsRejectedWith400) {
  testing::PrometheusServer prometheus({.targets = {}});
  const auto reply = prometheus.query_raw("sum(rate(torus_worker_steps_total[5m])");
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_NE(reply.body.find("parse error"), std::string::npos) << reply.body;
  EXPECT_EQ(prometheus.query_raw("vector(1)").status, 200);
}

TEST(PrometheusScrape, AServerNotReadyInTimeIsATimeoutAndIsCleanedUp) {
  // Nothing binds within 0 s, so the fixture gives up at its first check and must stop the server it started.
  EXPECT_THROW(testing::PrometheusServer({.ready_deadline = 0s}), Timeout);
  testing::PrometheusServer after({});  // a later server still starts
  EXPECT_EQ(after.query_raw("vector(1)").status, 200);
}

}  // namespace
}  // namespace torus::metrics

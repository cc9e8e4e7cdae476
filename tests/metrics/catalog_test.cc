// The worker and operator metric catalogs: behaviour of their helpers, and `promtool check metrics` clean on a
// populated exposition of each (promtool is the reference parser and linter of the text format).
#include <gtest/gtest.h>

#include <utility>

#include "common/metrics/operator_metrics.h"
#include "common/metrics/worker_metrics.h"
#include "common/util/error.h"
#include "tests/metrics/prometheus_fixture.h"

namespace torus::metrics {
namespace {

void populate(WorkerMetrics& m, int rank) {
  m.world_size.set(2);
  m.planned_steps.set(1000);
  m.planned_epochs.set(4);
  m.global_step.set(120 + rank);
  m.epoch.set(0.5);
  m.loss.set(0.71);
  m.train_accuracy.set(0.78);
  m.validation_accuracy.set(0.81);
  m.target_accuracy.set(0.92);
  m.learning_rate.set(0.2);
  m.batch_size.set(128);
  m.global_batch_size.set(256);
  m.image_size.set(28);
  m.images_per_second.set(1150.5);
  for (int i = 0; i < 5; ++i)
    m.record_step({.step = 0.11 + 0.01 * i, .data_wait = 0.002, .compute = 0.09, .comm_wait = 0.01 + 0.01 * i}, 128);
  m.checkpoint_seconds.observe(0.4);
  m.checkpoints.inc();
  m.collective_sequence.set(42);
  m.collective("ring", "global").observe(4e6, 0.01, 6e8);
  m.collective("hierarchical", "intra_node").observe(4e6, 0.002, 3e9);
}

std::string describe(const testing::ToolResult& r) { return "exit " + std::to_string(r.exit_code) + ":\n" + r.output; }

TEST(WorkerMetrics, PromtoolFindsNothingToSayAboutAPopulatedGang) {
  Registry registry;
  WorkerMetrics rank0(registry, "fashion", "team-a", 0, 1);
  // One catalog per process (each rank is a process): registering it twice must fail.
  EXPECT_THROW((WorkerMetrics{registry, "fashion", "team-a", 1, 1}), InvalidArgument);
  populate(rank0, 0);
  const std::string text = registry.expose();
  const auto result = testing::promtool_check_metrics(text);
  EXPECT_EQ(result.exit_code, 0) << describe(result) << "\n" << text;
  EXPECT_EQ(result.output, "") << describe(result);
  for (const char* name :
       {"torus_worker_step_seconds_bucket{job=\"fashion\",namespace=\"team-a\",rank=\"0\",attempt=\"1\",le=\"+Inf\"} 5",
        "torus_worker_images_total{job=\"fashion\",namespace=\"team-a\",rank=\"0\",attempt=\"1\"} 640",
        "torus_worker_allreduce_bus_bandwidth_bytes_per_second{job=\"fashion\",namespace=\"team-a\",rank=\"0\","
        "attempt=\"1\",algorithm=\"ring\",level=\"global\"} 6e+08"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
  }
}

TEST(WorkerMetrics, RecordStepStampsProgress) {
  Registry registry;
  WorkerMetrics m(registry, "j", "ns", 3, 0);
  EXPECT_NEAR(m.last_progress_timestamp.value(), m.start_timestamp.value(), 1e-3);  // start-up counts as progress
  m.record_step({.step = 0.5, .data_wait = 0.05, .compute = 0.4, .comm_wait = 0.03}, 64);
  EXPECT_EQ(m.steps.value(), 1);
  // Each part of the step lands in its own histogram.
  const std::pair<Histogram*, double> parts[] = {
      {&m.step_seconds, 0.5}, {&m.data_wait_seconds, 0.05}, {&m.compute_seconds, 0.4}, {&m.comm_wait_seconds, 0.03}};
  for (const auto& [histogram, seconds] : parts) {
    const Histogram::Snapshot s = histogram->snapshot();
    EXPECT_EQ(s.count, 1u);
    EXPECT_DOUBLE_EQ(s.sum, seconds);
  }
  EXPECT_EQ(m.images.value(), 64);
  EXPECT_NEAR(m.last_progress_timestamp.value(), static_cast<double>(std::time(nullptr)), 5);
  EXPECT_GT(m.start_timestamp.value(), 0);
  EXPECT_GT(m.resident_memory_bytes.value(), 1 << 20);  // this test binary uses more than a MiB
}

TEST(WorkerMetrics, BaselineIsTheMeanOfTheFirstSamplesThenStays) {
  Registry registry;
  WorkerMetrics m(registry, "j", "ns", 0, 0);
  CollectiveMetrics& ring = m.collective("ring", "global");
  EXPECT_EQ(&ring, &m.collective("ring", "global"));  // same handle on a second lookup
  for (int i = 0; i < CollectiveMetrics::kBaselineSamples; ++i) ring.observe(1e6, 0.001, 100.0 + 10 * i);
  ring.observe(1e6, 0.1, 1.0);  // a slow collective later does not move the baseline
  const std::string text = registry.expose();
  EXPECT_NE(text.find("torus_worker_allreduce_bus_bandwidth_baseline_bytes_per_second{job=\"j\",namespace=\"ns\","
                      "rank=\"0\",attempt=\"0\",algorithm=\"ring\",level=\"global\"} 145\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("torus_worker_allreduce_bus_bandwidth_bytes_per_second{job=\"j\",namespace=\"ns\","
                      "rank=\"0\",attempt=\"0\",algorithm=\"ring\",level=\"global\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("torus_worker_allreduce_calls_total{job=\"j\",namespace=\"ns\",rank=\"0\",attempt=\"0\","
                      "algorithm=\"ring\",level=\"global\"} 11\n"),
            std::string::npos)
      << text;
}

TEST(OperatorMetrics, PromtoolCleanAndHelpersCountRight) {
  Registry registry;
  OperatorMetrics m(registry, "0.1.0");
  m.reconciles.inc(3);
  m.reconcile_errors.labels({"api"}).inc();
  m.reconcile_seconds.observe(0.004);
  m.gang_restarts.labels({"team-a", "fashion", "pod_failed"}).inc();
  m.time_to_running.labels({"team-a"}).observe(12);
  m.time_to_first_step.labels({"team-a"}).observe(20);
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

TEST(Promtool, DetectsWhatItShould) {
  // The check above is only worth something if promtool rejects bad input here.
  const auto lint = testing::promtool_check_metrics("# HELP foo_count x\n# TYPE foo_count counter\nfoo_count 1\n");
  EXPECT_EQ(lint.exit_code, 3) << describe(lint);
  const auto parse = testing::promtool_check_metrics("this is { not metrics\n");
  EXPECT_EQ(parse.exit_code, 1) << describe(parse);
}

}  // namespace
}  // namespace torus::metrics

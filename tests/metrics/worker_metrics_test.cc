// The worker's metric catalog: `promtool check metrics` clean on a populated exposition (promtool is the reference
// parser and linter of the text format), what a step records, the all-reduce bandwidth baseline.
#include "common/metrics/worker_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>

#include "common/util/error.h"
#include "tests/metrics/prometheus_fixture.h"
#include "tests/metrics/sample_job.h"

namespace torus::metrics {
namespace {

void populate(WorkerMetrics& m, int rank) {
  testing::set_sample_plan(m);
  m.global_step.set(120 + rank);
  m.epoch.set(0.5);
  m.loss.set(0.71);
  for (int i = 0; i < 5; ++i)
    m.record_step({.step = 0.11 + 0.01 * i, .data_wait = 0.002, .compute = 0.09, .comm_wait = 0.01 + 0.01 * i}, 128);
  m.train_accuracy.set(0.78);
  m.validation_accuracy.set(0.81);
  m.checkpoint_seconds.observe(0.4);
  m.checkpoints.inc();
  m.learning_rate.set(0.2);
  m.images_per_second.set(1150.5);
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

// Unix time as the gauges stamp it: each stamp lies between the clock read before and the one after it.
double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(WorkerMetrics, RecordStepStampsProgress) {
  Registry registry;
  const double before_made = unix_now();
  WorkerMetrics m(registry, "j", "ns", 3, 0);
  const double after_made = unix_now();
  // Start-up counts as progress: both stamped while the metrics were made, the start first.
  EXPECT_LE(before_made, m.start_timestamp.value());
  EXPECT_LE(m.start_timestamp.value(), m.last_progress_timestamp.value());
  EXPECT_LE(m.last_progress_timestamp.value(), after_made);
  const double before_step = unix_now();
  m.record_step({.step = 0.5, .data_wait = 0.05, .compute = 0.4, .comm_wait = 0.03}, 64);
  const double after_step = unix_now();
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
  EXPECT_LE(before_step, m.last_progress_timestamp.value()) << "the step stamped progress";
  EXPECT_LE(m.last_progress_timestamp.value(), after_step);
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

TEST(Promtool, DetectsWhatItShould) {
  // The catalogs' promtool checks (here and in operator_metrics_test.cc) are only worth something if promtool
  // rejects bad input.
  const auto lint = testing::promtool_check_metrics("# HELP foo_count x\n# TYPE foo_count counter\nfoo_count 1\n");
  EXPECT_EQ(lint.exit_code, 3) << describe(lint);
  const auto parse = testing::promtool_check_metrics("this is { not metrics\n");
  EXPECT_EQ(parse.exit_code, 1) << describe(parse);
}

}  // namespace
}  // namespace torus::metrics

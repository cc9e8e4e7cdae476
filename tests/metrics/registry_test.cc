#include "common/metrics/registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/util/error.h"

namespace torus::metrics {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Registry, CounterWithoutLabelsIsExposedAtZero) {
  Registry registry;
  registry.counter("torus_test_events_total", "Events seen.");
  EXPECT_EQ(registry.expose(),
            "# HELP torus_test_events_total Events seen.\n"
            "# TYPE torus_test_events_total counter\n"
            "torus_test_events_total 0\n");
}

TEST(Registry, LabelledChildrenAreExposedSortedWithTheirValues) {
  Registry registry;
  auto& requests = registry.counter("torus_test_requests_total", "Requests.", {"verb", "code"});
  requests.labels({"PUT", "409"}).inc(2);
  requests.labels({"GET", "200"}).inc();
  requests.labels({"GET", "200"}).inc(0.5);
  EXPECT_EQ(registry.expose(),
            "# HELP torus_test_requests_total Requests.\n"
            "# TYPE torus_test_requests_total counter\n"
            "torus_test_requests_total{verb=\"GET\",code=\"200\"} 1.5\n"
            "torus_test_requests_total{verb=\"PUT\",code=\"409\"} 2\n");
}

TEST(Registry, EscapesLabelValuesAndHelp) {
  Registry registry;
  auto& g = registry.gauge("torus_test_gauge", "Line one\nback\\slash \"quotes stay\"", {"path"});
  g.labels({"a\"b\\c\nd"}).set(-3.25);
  const std::string text = registry.expose();
  EXPECT_TRUE(contains(text, "# HELP torus_test_gauge Line one\\nback\\\\slash \"quotes stay\"\n")) << text;
  EXPECT_TRUE(contains(text, "torus_test_gauge{path=\"a\\\"b\\\\c\\nd\"} -3.25\n")) << text;
}

TEST(Registry, FormatsSpecialFloatsLikeGo) {
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(1e21), "1e+21");
  EXPECT_EQ(std::stod(format_value(1.0 / 3.0)), 1.0 / 3.0);
}

TEST(Registry, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry registry;
  auto& h = registry.histogram("torus_test_latency_seconds", "Latency.", {"op"}, {0.1, 0.5, 1.0});
  Histogram& child = h.labels({"read"});
  for (double v : {0.05, 0.1, 0.3, 0.7, 2.0, 5.0}) child.observe(v);
  const Histogram::Snapshot snap = child.snapshot();
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{2, 3, 4, 6}));  // 0.1 is inclusive (le)
  EXPECT_EQ(snap.count, 6u);
  EXPECT_DOUBLE_EQ(snap.sum, 0.05 + 0.1 + 0.3 + 0.7 + 2.0 + 5.0);
  const std::string text = registry.expose();
  EXPECT_TRUE(contains(text, "# TYPE torus_test_latency_seconds histogram\n")) << text;
  EXPECT_TRUE(contains(text,
                       "torus_test_latency_seconds_bucket{op=\"read\",le=\"0.1\"} 2\n"
                       "torus_test_latency_seconds_bucket{op=\"read\",le=\"0.5\"} 3\n"
                       "torus_test_latency_seconds_bucket{op=\"read\",le=\"1\"} 4\n"
                       "torus_test_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 6\n"
                       "torus_test_latency_seconds_sum{op=\"read\"} 8.15\n"
                       "torus_test_latency_seconds_count{op=\"read\"} 6\n"))
      << text;
}

TEST(Registry, HistogramWithoutLabelsHasOnlyLe) {
  Registry registry;
  auto& h = registry.histogram("torus_test_size_bytes", "Sizes.", {}, exponential_buckets(1, 10, 3));
  h.labels({}).observe(50);
  const std::string text = registry.expose();
  EXPECT_TRUE(contains(text, "torus_test_size_bytes_bucket{le=\"10\"} 0\n")) << text;
  EXPECT_TRUE(contains(text, "torus_test_size_bytes_bucket{le=\"100\"} 1\n")) << text;
  EXPECT_TRUE(contains(text, "torus_test_size_bytes_count 1\n")) << text;
}

TEST(Registry, BucketHelpers) {
  EXPECT_EQ(exponential_buckets(0.001, 2, 4), (std::vector<double>{0.001, 0.002, 0.004, 0.008}));
  EXPECT_EQ(linear_buckets(1, 0.5, 3), (std::vector<double>{1, 1.5, 2}));
  EXPECT_THROW(exponential_buckets(0, 2, 3), InvalidArgument);
  EXPECT_THROW(linear_buckets(0, -1, 3), InvalidArgument);
}

TEST(Registry, RejectsBadRegistrationsNamingTheMetric) {
  Registry registry;
  registry.gauge("torus_test_dup", "x");
  auto expect_error = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected InvalidArgument mentioning " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_TRUE(contains(e.what(), needle)) << e.what();
    }
  };
  expect_error([&] { registry.gauge("torus_test_dup", "x"); }, "already registered");
  expect_error([&] { registry.counter("torus_test_events", "x"); }, "_total");
  expect_error([&] { registry.gauge("1bad", "x"); }, "1bad");
  expect_error([&] { registry.gauge("torus_test_g", "x", {"bad-label"}); }, "bad-label");
  expect_error([&] { registry.gauge("torus_test_g2", "x", {"__reserved"}); }, "__reserved");
  expect_error([&] { registry.gauge("torus_test_g3", "x", {"a", "a"}); }, "repeats");
  expect_error([&] { registry.histogram("torus_test_h", "x", {"le"}, {1}); }, "le");
  expect_error([&] { registry.histogram("torus_test_h2", "x", {}, {2, 1}); }, "increase");
  expect_error([&] { registry.histogram("torus_test_h3", "x", {}, {}); }, "at least one");
  expect_error(
      [&] {
        registry.histogram("torus_test_h4", "x", {}, {1, std::numeric_limits<double>::infinity()});
      },
      "finite");
  auto& g = registry.gauge("torus_test_labelled", "x", {"a", "b"});
  expect_error([&] { g.labels({"only-one"}); }, "expected 2 label values");
  expect_error([&] { registry.counter("torus_test_c_total", "x").labels({}).inc(-1); }, ">= 0");
}

TEST(Registry, ManyThreadsIncrementingLoseNothing) {
  Registry registry;
  auto& counter = registry.counter("torus_test_hits_total", "Hits.", {"shard"});
  auto& gauge = registry.gauge("torus_test_level", "Level.");
  auto& hist = registry.histogram("torus_test_obs", "Observations.", {}, {1, 2, 3});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share a child, the other half create their own while others expose().
      Counter& mine = counter.labels({t % 2 == 0 ? "shared" : "own" + std::to_string(t)});
      Gauge& level = gauge.labels({});
      Histogram& obs = hist.labels({});
      for (int i = 0; i < kPerThread; ++i) {
        mine.inc();
        level.inc();
        obs.observe(static_cast<double>(i % 4));
        if (i % 5000 == 0) (void)registry.expose();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counter.labels({"shared"}).value(), kThreads / 2 * kPerThread);
  for (int t = 1; t < kThreads; t += 2) EXPECT_EQ(counter.labels({"own" + std::to_string(t)}).value(), kPerThread);
  EXPECT_EQ(gauge.labels({}).value(), kThreads * kPerThread);
  const auto snap = hist.labels({}).snapshot();
  EXPECT_EQ(snap.count, static_cast<uint64_t>(kThreads * kPerThread));
  // Values 0,1,2,3 equally often: le=1 holds 0 and 1, le=2 adds 2, le=3 adds 3.
  EXPECT_EQ(snap.cumulative, (std::vector<uint64_t>{kThreads * kPerThread / 2, kThreads * kPerThread * 3 / 4,
                                                    kThreads * kPerThread, kThreads * kPerThread}));
  EXPECT_DOUBLE_EQ(snap.sum, kThreads * (kPerThread / 4) * (0 + 1 + 2 + 3));
}

TEST(Registry, GaugeCurrentTimeIsNow) {
  Registry registry;
  Gauge& g = registry.gauge("torus_test_ts_seconds", "ts").labels({});
  // Unix time, as read just before and just after the gauge was set: the stamp lies between them.
  const auto unix_now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  const double before = unix_now();
  g.set_to_current_time();
  const double after = unix_now();
  EXPECT_LE(before, g.value());
  EXPECT_LE(g.value(), after);
  const double stamped = g.value();
  g.dec(10);
  EXPECT_DOUBLE_EQ(g.value(), stamped - 10);
}

}  // namespace
}  // namespace torus::metrics

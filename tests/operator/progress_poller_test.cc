// operator/controller/progress_poller.cc: rank 0's progress read from a real worker metrics endpoint (WorkerMetrics
// served by the HttpExporter on 127.0.0.1) at the job's metricsPort, once per period per job; no read before rank 0
// has an IP or while it does not answer; the next read due on the period (at least 1 s), and at once after forget().
#include "operator/controller/progress_poller.h"

#include <gtest/gtest.h>

#include "common/metrics/http_exporter.h"
#include "common/metrics/worker_metrics.h"

namespace torus::controller {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json job_on_port(uint16_t port, int workers = 2) {
  return {{"metadata", {{"name", "j"}, {"namespace", "ns"}}},
          {"spec", {{"metricsPort", port}, {"gang", {{"workers", workers}, {"processesPerWorker", 1}}}}}};
}

json rank0_at(const std::string& ip) { return {{"metadata", {{"name", "j-worker-0"}}}, {"status", {{"podIP", ip}}}}; }

class ProgressPollerTest : public ::testing::Test {
 protected:
  metrics::Registry registry_;
  metrics::WorkerMetrics rank0_{registry_, "j", "ns", 0, 0};
  metrics::HttpExporter exporter_{registry_, {.host = "127.0.0.1", .port = 0}};
  const json job_ = job_on_port(exporter_.port());
  const json pod_ = rank0_at("127.0.0.1");
};

TEST_F(ProgressPollerTest, ReadsRankZerosProgressOncePerPeriod) {
  ProgressPoller poller(60s, 2000ms);
  rank0_.global_step.set(100);
  rank0_.epoch.set(1.5);
  const auto first = poller.poll("ns/j", job_, &pod_);
  ASSERT_TRUE(first.has_value()) << "the first poll of a job reads at once";
  EXPECT_EQ(first->progress.step, 100);
  EXPECT_EQ(first->progress.epoch, 1);
  EXPECT_FALSE(first->progress.update_time.empty());

  rank0_.global_step.set(250);
  EXPECT_FALSE(poller.poll("ns/j", job_, &pod_).has_value()) << "not due before the period";
  EXPECT_GT(poller.next_in("ns/j"), 55s);
  EXPECT_LE(poller.next_in("ns/j"), 60s);
  EXPECT_TRUE(poller.poll("ns/other", job_, &pod_).has_value()) << "each job has its own period";

  poller.forget("ns/j");  // the job left Running: its next run starts with a read
  EXPECT_EQ(poller.next_in("ns/j"), 1s);
  const auto again = poller.poll("ns/j", job_, &pod_);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->progress.step, 250);
}

TEST_F(ProgressPollerTest, NoReadWithoutARankZeroIpButThePeriodStartsAnyway) {
  ProgressPoller poller(60s, 2000ms);
  EXPECT_FALSE(poller.poll("ns/j", job_, nullptr).has_value()) << "rank 0 not cached";
  EXPECT_GT(poller.next_in("ns/j"), 55s);
  poller.forget("ns/j");
  const json pending = {{"metadata", {{"name", "j-worker-0"}}}, {"status", {{"phase", "Pending"}}}};
  EXPECT_FALSE(poller.poll("ns/j", job_, &pending).has_value()) << "no podIP yet";
  EXPECT_GT(poller.next_in("ns/j"), 55s);
}

TEST_F(ProgressPollerTest, ARankZeroThatDoesNotAnswerIsNoProgress) {
  ProgressPoller poller(60s, 2000ms);
  uint16_t closed_port = 0;
  {
    metrics::Registry empty;
    metrics::HttpExporter gone(empty, {.host = "127.0.0.1", .port = 0});
    closed_port = gone.port();
  }  // closed: connection refused
  EXPECT_FALSE(poller.poll("ns/j", job_on_port(closed_port), &pod_).has_value());
  metrics::Registry nothing;  // answers, but with none of a worker's metrics
  metrics::HttpExporter stranger(nothing, {.host = "127.0.0.1", .port = 0});
  EXPECT_FALSE(poller.poll("ns/k", job_on_port(stranger.port()), &pod_).has_value());
}

TEST(ProgressPollerPeriod, IsAtLeastOneSecond) {
  ProgressPoller poller(0s, 100ms);
  EXPECT_EQ(poller.next_in("ns/never-polled"), 1s);
  poller.poll("ns/j", json::object(), nullptr);
  EXPECT_EQ(poller.next_in("ns/j"), 1s);
  EXPECT_FALSE(poller.poll("ns/j", json::object(), nullptr).has_value());
}

}  // namespace
}  // namespace torus::controller

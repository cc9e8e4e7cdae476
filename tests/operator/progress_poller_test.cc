// operator/controller/progress_poller.cc: rank 0's progress read from a real worker metrics endpoint (WorkerMetrics
// served by the HttpExporter on 127.0.0.1) at the job's metricsPort, once per period per job; no read before rank 0
// has an IP or while it does not answer; the next read due on the period (at least 1 s), and at once after forget().
#include "operator/controller/progress_poller.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <list>

#include "common/metrics/goodput_metrics.h"
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

// A rank that accepts connections and never answers: a listening socket nobody accepts on (the kernel completes the
// handshake from its backlog), as a SIGSTOPped rank's metrics port does.
class HungRank {
 public:
  HungRank() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
    port_ = ntohs(a.sin_port);
  }
  ~HungRank() { ::close(fd_); }
  HungRank(const HungRank&) = delete;
  HungRank& operator=(const HungRank&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// Rank `rank`, serving its figures of attempt 1: `steps` steps of 0.5 s training each.
struct AnsweringRank {
  AnsweringRank(int rank, int steps) : worker{registry, "j", "ns", rank, 1}, goodput{registry, "j", "ns", rank, 1} {
    for (int i = 0; i < steps; ++i) worker.record_step({.step = 0.5, .compute = 0.5}, 32);
    goodput.add(process::TimePart::kTraining, 0.5 * steps);
  }
  metrics::Registry registry;
  metrics::WorkerMetrics worker;
  metrics::GoodputMetrics goodput;
  metrics::HttpExporter exporter{registry, {.host = "127.0.0.1", .port = 0}};
};

// The straggler's watch reads every rank; hung ranks cost the pass about one timeout together, not one each.
TEST(ProgressPollerArrivals, EveryAnsweringRankIsReadAndHungRanksAreWaitedForTogether) {
  std::list<AnsweringRank> answering;
  std::list<HungRank> hung;
  std::vector<RankTarget> targets;
  for (int r = 1; r <= 4; ++r) {
    const auto& a = answering.emplace_back(r, 10 * r);
    targets.push_back({r, "ns/j-worker-" + std::to_string(r), "127.0.0.1", a.exporter.port()});
  }
  for (int r = 5; r <= 8; ++r)
    targets.push_back({r, "ns/j-worker-" + std::to_string(r), "127.0.0.1", hung.emplace_back().port()});
  ProgressPoller poller(60s, 1000ms);
  const auto start = std::chrono::steady_clock::now();
  const std::map<int, RankArrival> read = poller.read_arrivals(targets, 1);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(read.size(), 4u) << "ranks 1-4 answer, 5-8 never do";
  for (int r = 1; r <= 4; ++r) {
    ASSERT_TRUE(read.count(r)) << r;
    EXPECT_EQ(read.at(r).steps, 10 * r);
    EXPECT_DOUBLE_EQ(read.at(r).offset_s, 5.0 * r);
  }
  EXPECT_LT(took, 4 * 1000ms) << "the four hung ranks were waited for one after another";
  EXPECT_TRUE(poller.read_arrivals(targets, 2).empty()) << "no rank holds figures of attempt 2";
}

TEST(ProgressPollerArrivals, ARankIsReadAtMetricsPortPlusItsLocalRankOnItsPodsIp) {
  const json job = job_on_port(9100, 2);
  const json pod = {{"metadata", {{"name", "j-worker-1"}, {"namespace", "ns"}}}, {"status", {{"podIP", "127.0.0.7"}}}};
  const auto t = rank_target(job, pod, 3, 11);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 11);
  EXPECT_EQ(t->ip, "127.0.0.7");
  EXPECT_EQ(t->port, 9103);
  EXPECT_EQ(t->pod_key, "ns/j-worker-1");
  const json pending = {{"metadata", {{"name", "j-worker-1"}, {"namespace", "ns"}}}, {"status", json::object()}};
  EXPECT_FALSE(rank_target(job, pending, 0, 2).has_value()) << "no IP yet";
}

}  // namespace
}  // namespace torus::controller

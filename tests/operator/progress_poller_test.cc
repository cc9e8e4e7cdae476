// operator/controller/progress_poller.cc: rank 0's progress read from a real worker metrics endpoint (WorkerMetrics
// served by the HttpExporter on 127.0.0.1) at the job's metricsPort, once per period per job; no read before rank 0
// has an IP or while it does not answer; the next read due on the period (at least 1 s), and at once after forget().
#include "operator/controller/progress_poller.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <list>
#include <thread>
#include <utility>

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
  EXPECT_EQ(first->progress.epoch, 2) << "1.5 epochs done: the second is under way (1-based, as a person reads it)";
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

// Ranks that accept connections and never answer, as SIGSTOPped ranks' metrics ports do (the kernel completes the
// handshake from the listen backlog; nothing reads the request). One thread watches all of them: it accepts each
// connection, notices when the reader gives up on one (the peer closed it), and records how many of the ranks were
// being read at once. Once every rank is being read at the same time it closes them all (the reads end at once, as
// reads of ranks that died would), so a poller that reads them together finishes without waiting out its timeout,
// and one that reads them one after another never sees them all open.
class HungRanks {
 public:
  explicit HungRanks(int n) {
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(a);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 16) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        ADD_FAILURE() << "cannot listen on 127.0.0.1";
      listeners_.push_back(fd);
      ports_.push_back(ntohs(a.sin_port));
    }
    if (::pipe2(stop_, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe2";
    thread_ = std::thread([this] { serve(); });
  }
  ~HungRanks() {
    (void)::write(stop_[1], "x", 1);
    thread_.join();
    for (int fd : listeners_) ::close(fd);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  HungRanks(const HungRanks&) = delete;
  HungRanks& operator=(const HungRanks&) = delete;
  int port(size_t i) const { return ports_.at(i); }
  // The most ranks that had a read open at the same time.
  int most_read_together() const { return most_together_.load(); }

 private:
  void serve() {
    std::vector<int> open(listeners_.size(), -1);  // by rank: the connection being read, or -1
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}};
      for (int fd : listeners_) fds.push_back({fd, POLLIN, 0});
      for (int fd : open) fds.push_back({fd, POLLIN, 0});  // a negative fd is skipped by poll
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) break;
      const size_t n = listeners_.size();
      for (size_t i = 0; i < n; ++i) {
        pollfd& conn = fds[1 + n + i];
        if (open[i] >= 0 && (conn.revents & (POLLIN | POLLHUP | POLLERR))) {
          char buf[4096];  // the request, or 0 bytes: the reader gave up on this rank
          const ssize_t got = ::recv(open[i], buf, sizeof(buf), MSG_DONTWAIT);
          if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            ::close(open[i]);
            open[i] = -1;
          }
        }
        if (open[i] < 0 && (fds[1 + i].revents & POLLIN)) open[i] = ::accept4(listeners_[i], nullptr, nullptr, SOCK_CLOEXEC);
      }
      const int together = static_cast<int>(std::count_if(open.begin(), open.end(), [](int fd) { return fd >= 0; }));
      most_together_.store(std::max(most_together_.load(), together));
      if (together == static_cast<int>(n)) {
        for (int& fd : open) ::close(std::exchange(fd, -1));
      }
    }
    for (int fd : open)
      if (fd >= 0) ::close(fd);
  }

  std::vector<int> listeners_;
  std::vector<int> ports_;
  int stop_[2] = {-1, -1};
  std::atomic<int> most_together_{0};
  std::thread thread_;
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

// The straggler's watch reads every rank; hung ranks are read together, not one after another: all four are being
// read at once (the timeout is far longer than any read here, so a poller that waited for them one at a time would
// never have them open together, and would take four timeouts).
TEST(ProgressPollerArrivals, EveryAnsweringRankIsReadAndHungRanksAreWaitedForTogether) {
  std::list<AnsweringRank> answering;
  HungRanks hung(4);
  std::vector<RankTarget> targets;
  for (int r = 1; r <= 4; ++r) {
    const auto& a = answering.emplace_back(r, 10 * r);
    targets.push_back({r, "ns/j-worker-" + std::to_string(r), "127.0.0.1", a.exporter.port()});
  }
  for (int r = 5; r <= 8; ++r) targets.push_back({r, "ns/j-worker-" + std::to_string(r), "127.0.0.1", hung.port(r - 5)});
  ProgressPoller poller(60s, 10000ms);
  const std::map<int, RankArrival> read = poller.read_arrivals(targets, 1);
  ASSERT_EQ(read.size(), 4u) << "ranks 1-4 answer, 5-8 never do";
  for (int r = 1; r <= 4; ++r) {
    ASSERT_TRUE(read.count(r)) << r;
    EXPECT_EQ(read.at(r).steps, 10 * r);
    EXPECT_DOUBLE_EQ(read.at(r).offset_s, 5.0 * r);
  }
  EXPECT_EQ(hung.most_read_together(), 4) << "the four hung ranks were waited for one after another";
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

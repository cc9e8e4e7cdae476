// Work queue: de-duplication, one worker per key, timers, rate-limited and conflicted re-adds.
#include "operator/kube/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace torus::kube {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, DeduplicatesQueuedKeys) {
  WorkQueue q;
  q.add("ns/a");
  q.add("ns/a");
  q.add("ns/b");
  EXPECT_EQ(q.length(), 2u);
  EXPECT_EQ(q.get(), "ns/a");
  EXPECT_EQ(q.get(), "ns/b");
}

TEST(WorkQueue, KeyAddedWhileProcessingComesBackAfterDone) {
  WorkQueue q;
  q.add("ns/a");
  auto key = q.get();
  ASSERT_EQ(key, "ns/a");
  q.add("ns/a");
  q.add("ns/a");
  EXPECT_EQ(q.length(), 0u) << "a key being processed must not be handed to a second worker";
  q.done("ns/a");
  EXPECT_EQ(q.length(), 1u);
  EXPECT_EQ(q.get(), "ns/a");
  q.done("ns/a");
  EXPECT_EQ(q.length(), 0u);
}

TEST(WorkQueue, NeverProcessesOneKeyConcurrently) {
  WorkQueue q;
  std::atomic<int> in_flight{0}, max_in_flight{0}, processed{0};
  constexpr int kAdds = 2000;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto key = q.get()) {
        int now = ++in_flight;
        int prev = max_in_flight.load();
        while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
        }
        std::this_thread::yield();
        --in_flight;
        ++processed;
        q.done(*key);
      }
    });
  }
  for (int i = 0; i < kAdds; ++i) q.add("ns/only");
  // Wait (bounded) until the queue is drained, then stop the workers.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (q.length() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  q.shutdown();
  for (auto& t : workers) t.join();
  EXPECT_EQ(max_in_flight.load(), 1);
  EXPECT_GE(processed.load(), 1);
  EXPECT_LE(processed.load(), kAdds);
}

TEST(WorkQueue, AddAfterDeliversOnlyOnceDue) {
  WorkQueue q;
  auto start = std::chrono::steady_clock::now();
  q.add_after("ns/timer", 30ms);
  q.add_after("ns/timer", 10s);  // a later timer for the same key does not postpone the earlier one
  EXPECT_EQ(q.length(), 0u);
  auto key = q.get();
  EXPECT_EQ(key, "ns/timer");
  // The property (a lower bound, which load cannot break): a delayed key is not handed out before it is due.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

TEST(WorkQueue, ImmediateAddOvertakesTimer) {
  WorkQueue q;
  q.add_after("ns/late", 1h);
  q.add("ns/now");
  EXPECT_EQ(q.get(), "ns/now");
}

TEST(WorkQueue, ShutdownWakesBlockedGet) {
  WorkQueue q;
  auto waiter = std::async(std::launch::async, [&] { return q.get(); });
  q.shutdown();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), std::nullopt);
}

TEST(WorkQueue, RateLimitedCountsFailuresAndForgetResets) {
  WorkQueue q(1ms, 1s);
  q.add_rate_limited("ns/a");
  q.add_rate_limited("ns/a");
  EXPECT_EQ(q.failures("ns/a"), 2);
  EXPECT_EQ(q.get(), "ns/a");
  q.forget("ns/a");
  EXPECT_EQ(q.failures("ns/a"), 0);
}

// A run of 409s (a conflict storm) must not push a key out by the error backoff's 1000 s cap: each conflict is
// retried within the conflict cap, and conflicts leave the error backoff alone.
TEST(WorkQueue, ConflictsRetryWithinTheConflictCapNotTheErrorCap) {
  WorkQueue q(5ms, 1000s, 20ms);
  auto storm = std::async(std::launch::async, [&] {
    for (int i = 0; i < 40; ++i) {  // 5 ms * 2^39 would be years under the error backoff
      q.add_conflicted("ns/a");
      auto key = q.get();
      if (key != "ns/a") return false;
      q.done(*key);
    }
    return true;
  });
  const bool finished = storm.wait_for(60s) == std::future_status::ready;
  q.shutdown();  // a regression's blocked get() returns, so the test still ends
  EXPECT_TRUE(finished) << "a conflicted key waited past the conflict cap";
  EXPECT_TRUE(storm.get());
  EXPECT_EQ(q.failures("ns/a"), 0) << "conflicts are not errors";
}

}  // namespace
}  // namespace torus::kube

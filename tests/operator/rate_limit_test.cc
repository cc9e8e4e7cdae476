// Rate limiting: per-key exponential backoff and its arithmetic, Retry-After parsing, the client's token bucket.
#include "operator/kube/rate_limit.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/util/error.h"

namespace torus::kube {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, DoublesFrom5msAndCapsAt1000s) {
  ExponentialBackoff b(5ms, 1000s);
  EXPECT_EQ(b.next("k"), 5ms);
  EXPECT_EQ(b.next("k"), 10ms);
  EXPECT_EQ(b.next("k"), 20ms);
  EXPECT_EQ(b.next("other"), 5ms) << "backoff is per key";
  for (int i = 0; i < 100; ++i) b.next("k");
  EXPECT_EQ(b.next("k"), std::chrono::nanoseconds(1000s));
  b.forget("k");
  EXPECT_EQ(b.next("k"), 5ms);
}

TEST(Backoff, DelayFormula) {
  EXPECT_EQ(backoff_delay(100ms, 10s, 0), 100ms);
  EXPECT_EQ(backoff_delay(100ms, 10s, 3), 800ms);
  EXPECT_EQ(backoff_delay(100ms, 10s, 7), 10s);
  EXPECT_EQ(backoff_delay(100ms, 10s, 1000), 10s);
}

TEST(RetryAfter, ParsesSecondsOnly) {
  EXPECT_EQ(parse_retry_after("3"), std::chrono::nanoseconds(3s));
  EXPECT_EQ(parse_retry_after(""), std::nullopt);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_EQ(parse_retry_after("-1"), std::nullopt);
}

TEST(TokenBucket, BurstThenQps) {
  TokenBucket bucket(10.0, 3);  // 10 per second, 3 saved
  auto t0 = SteadyClock::time_point(100s);
  EXPECT_EQ(bucket.reserve(t0), Duration::zero());
  EXPECT_EQ(bucket.reserve(t0), Duration::zero());
  EXPECT_EQ(bucket.reserve(t0), Duration::zero());
  // The burst is spent: each further request waits one more 1/qps slot.
  EXPECT_NEAR(std::chrono::duration<double>(bucket.reserve(t0)).count(), 0.1, 1e-9);
  EXPECT_NEAR(std::chrono::duration<double>(bucket.reserve(t0)).count(), 0.2, 1e-9);
  // One second later the debt is paid and tokens refilled, but never beyond the burst.
  auto t1 = t0 + 10s;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.reserve(t1), Duration::zero());
  EXPECT_GT(bucket.reserve(t1), Duration::zero());
}

TEST(TokenBucket, SustainedRateMatchesQps) {
  TokenBucket bucket(50.0, 5);
  auto t = SteadyClock::time_point(0s);
  Duration last{};
  for (int i = 0; i < 105; ++i) last = bucket.reserve(t);
  // 105 requests at once: 5 from the burst, 100 paid at 50/s -> the last waits 2 s.
  EXPECT_NEAR(std::chrono::duration<double>(last).count(), 2.0, 1e-6);
}

TEST(TokenBucket, RejectsNonPositiveQps) { EXPECT_THROW(TokenBucket(0.0, 1), InvalidArgument); }

}  // namespace
}  // namespace torus::kube

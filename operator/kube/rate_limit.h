#pragma once
// Client-side rate limiting and retry backoff for the Kubernetes client and the work queue.
// The arithmetic is pure (callers pass `now`), so tests run on a fake clock and never sleep.
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace torus::kube {

using SteadyClock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

// Token bucket: `qps` tokens per second, at most `burst` saved up (client-go's flowcontrol semantics).
class TokenBucket {
 public:
  TokenBucket(double qps, int burst);
  // Takes one token at `now` and returns how long the caller must wait before using it (0 when available).
  // Reservations queue up: each one pushes the next caller's wait further out.
  Duration reserve(SteadyClock::time_point now);
  // Blocks the calling thread until a token is available.
  void acquire();
  double qps() const { return qps_; }
  int burst() const { return burst_; }

 private:
  void refill(SteadyClock::time_point now);

  std::mutex mu_;
  double qps_;
  int burst_;
  double tokens_;
  std::optional<SteadyClock::time_point> last_;
};

// Exponential backoff per key: base * 2^failures, capped (the work queue's 5 ms .. 1000 s).
class ExponentialBackoff {
 public:
  ExponentialBackoff(Duration base, Duration cap) : base_(base), cap_(cap) {}
  // The delay for this key's next retry; counts one more failure.
  Duration next(const std::string& key);
  void forget(const std::string& key);
  int failures(const std::string& key) const;

 private:
  mutable std::mutex mu_;
  Duration base_;
  Duration cap_;
  std::unordered_map<std::string, int> failures_;
};

// The delay for the `attempt`-th retry (0-based) of one request: base * 2^attempt, capped.
Duration backoff_delay(Duration base, Duration cap, int attempt);

// Parses an HTTP Retry-After header given in seconds; nullopt when absent or not a number.
std::optional<Duration> parse_retry_after(const std::string& header);

}  // namespace torus::kube

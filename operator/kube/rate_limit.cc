#include "operator/kube/rate_limit.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "common/util/error.h"

namespace torus::kube {

TokenBucket::TokenBucket(double qps, int burst) : qps_(qps), burst_(std::max(burst, 1)), tokens_(burst_) {
  if (!(qps > 0)) throw InvalidArgument("rate limit qps: must be positive, got " + std::to_string(qps));
}

void TokenBucket::refill(SteadyClock::time_point now) {
  if (last_ && now > *last_) {
    double elapsed = std::chrono::duration<double>(now - *last_).count();
    tokens_ = std::min<double>(burst_, tokens_ + elapsed * qps_);
  }
  if (!last_ || now > *last_) last_ = now;
}

Duration TokenBucket::reserve(SteadyClock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Duration::zero();
  // A negative balance is a debt the caller pays by waiting; later callers wait behind it.
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

void TokenBucket::acquire() {
  Duration wait = reserve(SteadyClock::now());
  if (wait > Duration::zero()) std::this_thread::sleep_for(wait);
}

Duration ExponentialBackoff::next(const std::string& key) {
  std::lock_guard lock(mu_);
  int n = failures_[key]++;
  return backoff_delay(base_, cap_, n);
}

void ExponentialBackoff::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

int ExponentialBackoff::failures(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

Duration backoff_delay(Duration base, Duration cap, int attempt) {
  // 2^attempt overflows quickly: compare in floating point and clamp before converting back.
  double scaled = static_cast<double>(base.count()) * std::pow(2.0, std::min(attempt, 62));
  if (scaled >= static_cast<double>(cap.count())) return cap;
  return Duration(static_cast<Duration::rep>(scaled));
}

std::optional<Duration> parse_retry_after(const std::string& header) {
  if (header.empty()) return std::nullopt;
  long seconds = 0;
  auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), seconds);
  // An HTTP date or garbage: the caller falls back to its own backoff.
  if (ec != std::errc() || end != header.data() + header.size() || seconds < 0) return std::nullopt;
  return std::chrono::seconds(seconds);
}

}  // namespace torus::kube

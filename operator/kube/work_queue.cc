#include "operator/kube/work_queue.h"

namespace torus::kube {

WorkQueue::WorkQueue(Duration base, Duration cap, Duration conflict_cap)
    : backoff_(base, cap), conflict_backoff_(base, conflict_cap) {}

void WorkQueue::enqueue_locked(const std::string& key) {
  if (state_ == State::kShutDown || !dirty_.insert(key).second) return;
  if (processing_.count(key)) return;  // done() re-queues it
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mu_);
  enqueue_locked(key);
}

void WorkQueue::add_after(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) return add(key);
  std::lock_guard lock(mu_);
  if (state_ == State::kShutDown) return;
  auto when = SteadyClock::now() + delay;
  auto it = timer_of_.find(key);
  if (it != timer_of_.end()) {
    if (it->second <= when) return;
    for (auto t = timers_.lower_bound(it->second); t != timers_.end() && t->first == it->second; ++t) {
      if (t->second == key) {
        timers_.erase(t);
        break;
      }
    }
  }
  timers_.emplace(when, key);
  timer_of_[key] = when;
  cv_.notify_all();  // a sleeping get() may need to wake earlier
}

void WorkQueue::add_rate_limited(const std::string& key) { add_after(key, backoff_.next(key)); }

void WorkQueue::add_conflicted(const std::string& key) { add_after(key, conflict_backoff_.next(key)); }

void WorkQueue::forget(const std::string& key) {
  backoff_.forget(key);
  conflict_backoff_.forget(key);
}

void WorkQueue::promote_due_timers_locked(SteadyClock::time_point now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    std::string key = timers_.begin()->second;
    timers_.erase(timers_.begin());
    timer_of_.erase(key);
    enqueue_locked(key);
  }
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (state_ == State::kShutDown) return std::nullopt;
    promote_due_timers_locked(SteadyClock::now());
    if (!queue_.empty()) break;
    if (timers_.empty()) {
      cv_.wait(lock);
    } else {
      // A copy: wait_until reads its deadline again after waking, when another worker may have erased the timer.
      const SteadyClock::time_point next = timers_.begin()->first;
      cv_.wait_until(lock, next);
    }
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) && state_ == State::kOpen) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::shutdown() {
  std::lock_guard lock(mu_);
  state_ = State::kShutDown;
  cv_.notify_all();
}

size_t WorkQueue::length() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace torus::kube

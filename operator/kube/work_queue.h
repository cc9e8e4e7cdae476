#pragma once
// The controller work queue (client-go's rate-limited delaying queue): de-duplicated keys, one key processed by
// one worker at a time, per-key exponential backoff for errors, a short separate backoff for conflicts, and timers
// for requeueAfter.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "operator/kube/rate_limit.h"

namespace torus::kube {

class WorkQueue {
 public:
  // Error backoff from `base` doubling to `cap` per key (defaults: 5 ms .. 1000 s); conflict backoff from `base`
  // doubling to `conflict_cap` (default 1 s).
  explicit WorkQueue(Duration base = std::chrono::milliseconds(5), Duration cap = std::chrono::seconds(1000),
                     Duration conflict_cap = std::chrono::seconds(1));
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless already queued; a key being processed is queued again once done() is called.
  void add(const std::string& key);
  // Queues `key` after `delay` (an earlier pending timer for the same key wins).
  void add_after(const std::string& key, Duration delay);
  // Queues `key` after its next exponential backoff delay.
  void add_rate_limited(const std::string& key);
  // Queues `key` after its next conflict backoff: a 409 means only that the pass worked from a stale copy, so it is
  // redone promptly from fresher state, however many conflicts came before (never the error backoff's 1000 s).
  void add_conflicted(const std::string& key);
  // Resets `key`'s backoffs (error and conflict) after a successful pass.
  void forget(const std::string& key);
  int failures(const std::string& key) const { return backoff_.failures(key); }

  // Blocks until a key is ready (and marks it processing) or the queue shuts down (nullopt).
  std::optional<std::string> get();
  // Marks `key` no longer processing; re-queues it if it was added meanwhile.
  void done(const std::string& key);
  // Wakes every get() with nullopt; later adds are ignored.
  void shutdown();

  size_t length() const;

 private:
  void enqueue_locked(const std::string& key);
  void promote_due_timers_locked(SteadyClock::time_point now);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;  // queued or waiting to be re-queued after processing
  std::unordered_set<std::string> processing_;
  std::multimap<SteadyClock::time_point, std::string> timers_;
  std::map<std::string, SteadyClock::time_point> timer_of_;  // the earliest pending timer per key
  ExponentialBackoff backoff_;
  ExponentialBackoff conflict_backoff_;
  enum class State { kOpen, kShutDown } state_ = State::kOpen;
};

}  // namespace torus::kube

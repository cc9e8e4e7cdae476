#pragma once
// Leader election on a coordination.k8s.io/v1 Lease (client-go's resourcelock semantics): replicas race to
// hold the lease; the holder renews it every retry period; others take over once it has not been renewed for a
// lease duration (by their own clock, so clock skew between nodes does not matter). Graceful shutdown releases
// it so a standby takes over at once.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "operator/kube/client.h"

namespace torus::kube {

struct LeaderElectionOptions {
  std::string namespace_;
  std::string lease_name = "torus-operator";
  std::string identity;  // unique per replica (pod name + random suffix)
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  LeaderElector(Client& client, LeaderElectionOptions options);
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Blocks until this replica holds the lease (true) or stop() was called (false).
  bool acquire();
  // Blocks renewing the lease until stop() (returns true: still leader, release() next) or until a renewal
  // failed for longer than the renew deadline (returns false: leadership lost, stop acting at once).
  bool keep_renewing();
  // Gives the lease up (best effort, never throws), so a standby can take over without waiting.
  void release() noexcept;
  void stop();
  bool is_leader() const { return leader_.load(); }
  const std::string& identity() const { return options_.identity; }

 private:
  enum class Attempt { kAcquired, kHeldByOther, kFailed };
  Attempt try_acquire_or_renew();
  bool wait(std::chrono::milliseconds d);  // false when stopped

  Client& client_;
  LeaderElectionOptions options_;
  std::atomic<bool> leader_{false};
  // What we last saw of someone else's lease, and when by our clock.
  std::string observed_record_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::mutex mu_;
  std::condition_variable cv_;
  enum class State { kRunning, kStopped } state_ = State::kRunning;
};

// RFC 3339 with microseconds, the MicroTime format of Lease times.
std::string micro_time_now();

}  // namespace torus::kube

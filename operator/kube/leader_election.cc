#include "operator/kube/leader_election.h"

#include <ctime>

#include "common/log/log.h"

namespace torus::kube {

std::string micro_time_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%06ldZ", buf, static_cast<long>(micros));
  return out;
}

LeaderElector::LeaderElector(Client& client, LeaderElectionOptions options)
    : client_(client), options_(std::move(options)) {}

bool LeaderElector::wait(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return state_ == State::kStopped; });
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(mu_);
    state_ = State::kStopped;
  }
  cv_.notify_all();
}

LeaderElector::Attempt LeaderElector::try_acquire_or_renew() {
  const Resource& leases = resources::kLeases;
  std::string now = micro_time_now();
  int duration_s = static_cast<int>(std::chrono::ceil<std::chrono::seconds>(options_.lease_duration).count());
  try {
    auto lease = client_.try_get(leases, options_.namespace_, options_.lease_name);
    if (!lease) {
      json fresh = {{"metadata", {{"name", options_.lease_name}, {"namespace", options_.namespace_}}},
                    {"spec",
                     {{"holderIdentity", options_.identity},
                      {"leaseDurationSeconds", duration_s},
                      {"acquireTime", now},
                      {"renewTime", now},
                      {"leaseTransitions", 0}}}};
      client_.create(leases, options_.namespace_, fresh);
      return Attempt::kAcquired;
    }
    json spec = lease->value("spec", json::object());
    std::string holder = spec.value("holderIdentity", "");
    std::string record = spec.dump();
    auto steady_now = std::chrono::steady_clock::now();
    if (record != observed_record_) {
      observed_record_ = record;
      observed_at_ = steady_now;
    }
    int held_for_s = spec.value("leaseDurationSeconds", duration_s);
    bool expired = steady_now - observed_at_ >= std::chrono::seconds(held_for_s);
    if (!holder.empty() && holder != options_.identity && !expired) return Attempt::kHeldByOther;
    json updated = *lease;
    if (holder != options_.identity) {
      updated["spec"]["acquireTime"] = now;
      updated["spec"]["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
    }
    updated["spec"]["holderIdentity"] = options_.identity;
    updated["spec"]["leaseDurationSeconds"] = duration_s;
    updated["spec"]["renewTime"] = now;
    json stored = client_.update(leases, options_.namespace_, updated);  // 409 when another replica got there first
    observed_record_ = stored.value("spec", json::object()).dump();
    observed_at_ = steady_now;
    return Attempt::kAcquired;
  } catch (const ApiError& e) {
    if (e.conflict() || e.already_exists()) return Attempt::kHeldByOther;
    TLOG(Warn) << "leader election: " << e.what();
    return Attempt::kFailed;
  } catch (const ConnectionError& e) {
    TLOG(Warn) << "leader election: " << e.what();
    return Attempt::kFailed;
  }
}

bool LeaderElector::acquire() {
  TLOG(Info) << "leader election: " << options_.identity << " waiting for lease " << options_.namespace_ << "/"
             << options_.lease_name;
  for (;;) {
    if (try_acquire_or_renew() == Attempt::kAcquired) {
      leader_ = true;
      TLOG(Info) << "leader election: " << options_.identity << " is the leader";
      return true;
    }
    if (!wait(options_.retry_period)) return false;
  }
}

bool LeaderElector::keep_renewing() {
  auto last_renewal = std::chrono::steady_clock::now();
  while (wait(options_.retry_period)) {
    Attempt a = try_acquire_or_renew();
    if (a == Attempt::kAcquired) {
      last_renewal = std::chrono::steady_clock::now();
      continue;
    }
    if (a == Attempt::kHeldByOther || std::chrono::steady_clock::now() - last_renewal > options_.renew_deadline) {
      leader_ = false;
      TLOG(Error) << "leader election: " << options_.identity << " lost the lease";
      return false;
    }
  }
  return true;
}

void LeaderElector::release() noexcept {
  if (!leader_.exchange(false)) return;
  try {
    auto lease = client_.try_get(resources::kLeases, options_.namespace_, options_.lease_name);
    if (!lease || lease->value("spec", json::object()).value("holderIdentity", "") != options_.identity) return;
    json updated = *lease;
    updated["spec"]["holderIdentity"] = "";
    updated["spec"]["leaseDurationSeconds"] = 1;
    updated["spec"]["renewTime"] = micro_time_now();
    client_.update(resources::kLeases, options_.namespace_, updated);
    TLOG(Info) << "leader election: " << options_.identity << " released the lease";
  } catch (const std::exception& e) {  // shutting down: nothing more to do than say so
    TLOG(Warn) << "leader election: release failed: " << e.what();
  }
}

}  // namespace torus::kube

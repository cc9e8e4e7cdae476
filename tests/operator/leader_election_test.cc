// operator/kube/leader_election.cc against the in-process stand-in's Lease API: the first replica creates the lease,
// a standby takes it over only once it has gone unrenewed for a lease duration (by the standby's clock), a released
// lease is taken at once, and a holder stops acting when another replica holds the lease, when its renewal is
// refused with 409, or when renewals fail past the renew deadline.
#include "operator/kube/leader_election.h"

#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "tests/operator/inprocess_standin.h"

namespace torus::kube {
namespace {

using namespace std::chrono_literals;
using test::eventually;
namespace res = resources;

// Stops an elector when a test leaves early, so that the thread of a pending acquire or keep_renewing ends (a
// std::async future waits for it when destroyed): declare it after the future.
struct StopOnExit {
  LeaderElector& elector;
  ~StopOnExit() { elector.stop(); }
};

class LeaderElectionTest : public test::InProcessStandin {
 protected:
  // Whether the server has answered `times` GETs of the lease: a standby polls it while the holder keeps it.
  bool read_the_lease(int times) {
    return eventually([&] { return server_->faults().count("get", "leases.coordination.k8s.io") >= times; });
  }
  static LeaderElectionOptions options(const std::string& identity, std::chrono::milliseconds lease_duration = 1000ms) {
    LeaderElectionOptions o;
    o.namespace_ = "default";
    o.lease_name = "torus-operator";
    o.identity = identity;
    o.lease_duration = lease_duration;
    o.renew_deadline = 500ms;
    o.retry_period = 20ms;
    return o;
  }
  json spec() { return client_->get(res::kLeases, "default", "torus-operator")["spec"]; }
  std::string holder() { return spec().value("holderIdentity", ""); }
};

TEST_F(LeaderElectionTest, TheFirstReplicaCreatesTheLeaseAndHoldsIt) {
  LeaderElector a(*client_, options("a", 1500ms));
  ASSERT_TRUE(a.acquire());
  EXPECT_TRUE(a.is_leader());
  const json s = spec();
  EXPECT_EQ(s.value("holderIdentity", ""), "a");
  EXPECT_EQ(s.value("leaseDurationSeconds", 0), 2) << "whole seconds, rounded up";
  EXPECT_EQ(s.value("leaseTransitions", -1), 0);
  EXPECT_EQ(s.value("acquireTime", ""), s.value("renewTime", ""));
  EXPECT_TRUE(std::regex_match(s.value("renewTime", ""), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")))
      << "MicroTime: " << s.dump();
}

TEST_F(LeaderElectionTest, AStandbyWaitsWhileTheHolderRenewsAndTakesOverOnceItStops) {
  LeaderElector a(*client_, options("a"));
  ASSERT_TRUE(a.acquire());
  LeaderElector b(*client_, options("b"));
  auto renewing = std::async(std::launch::async, [&] { return a.keep_renewing(); });
  StopOnExit stop_a{a};
  auto standby = std::async(std::launch::async, [&] { return b.acquire(); });
  StopOnExit stop_b{b};
  // Renewals (one update each 20 ms) move renewTime on: while they do, the standby (by its own clock) never sees the
  // lease expire, even past its 1 s duration.
  ASSERT_TRUE(eventually([&] { return server_->faults().count("update", "leases.coordination.k8s.io") >= 60; }));
  EXPECT_EQ(standby.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(holder(), "a");

  a.stop();  // a crashed replica: no release, the lease just stops being renewed
  EXPECT_TRUE(renewing.get()) << "stopped while still the leader";
  ASSERT_EQ(standby.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(standby.get());
  EXPECT_TRUE(b.is_leader());
  const json s = spec();
  EXPECT_EQ(s.value("holderIdentity", ""), "b");
  EXPECT_EQ(s.value("leaseTransitions", -1), 1);
  EXPECT_EQ(s.value("acquireTime", ""), s.value("renewTime", ""));
}

TEST_F(LeaderElectionTest, AReleasedLeaseIsTakenAtOnceWithoutWaitingForItsDuration) {
  LeaderElector a(*client_, options("a", 60s));
  ASSERT_TRUE(a.acquire());
  LeaderElector b(*client_, options("b", 60s));
  auto standby = std::async(std::launch::async, [&] { return b.acquire(); });
  StopOnExit stop_b{b};
  ASSERT_TRUE(read_the_lease(3)) << "the standby never polled the lease";
  a.release();
  EXPECT_FALSE(a.is_leader());
  EXPECT_NE(holder(), "a") << "released: the lease no longer names its holder";
  // Within half the 60 s lease: only the release can have let the standby in.
  ASSERT_EQ(standby.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(standby.get());
  EXPECT_EQ(holder(), "b");
  EXPECT_EQ(spec().value("leaseTransitions", -1), 1);
  const int64_t writes = server_->faults().count("update", "leases.coordination.k8s.io");
  a.release();  // no longer the leader: nothing is written
  EXPECT_EQ(server_->faults().count("update", "leases.coordination.k8s.io"), writes);
  EXPECT_EQ(holder(), "b");
}

TEST_F(LeaderElectionTest, AHolderWhoseLeaseAnotherReplicaTookStopsRenewing) {
  LeaderElector a(*client_, options("a", 60s));
  ASSERT_TRUE(a.acquire());
  json lease = client_->get(res::kLeases, "default", "torus-operator");
  lease["spec"]["holderIdentity"] = "intruder";
  client_->update(res::kLeases, "default", lease);
  EXPECT_FALSE(a.keep_renewing());
  EXPECT_FALSE(a.is_leader());
  EXPECT_EQ(holder(), "intruder");
  a.release();  // not the leader any more: the intruder's lease is left alone
  EXPECT_EQ(holder(), "intruder");
}

TEST_F(LeaderElectionTest, A409OnRenewalMeansAnotherReplicaWroteTheLeaseFirst) {
  LeaderElector a(*client_, options("a", 60s));
  ASSERT_TRUE(a.acquire());
  server_->faults().conflict_next(1, "leases.coordination.k8s.io");
  EXPECT_FALSE(a.keep_renewing());
  EXPECT_FALSE(a.is_leader());
}

TEST_F(LeaderElectionTest, RenewalsFailingPastTheRenewDeadlineLoseLeadership) {
  auto client = make_client([] {
    ClientOptions o = test::fast_client_options();
    o.max_retries = 0;
    return o;
  }());
  LeaderElector a(*client, options("a", 60s));
  ASSERT_TRUE(a.acquire());
  server_->faults().fail_next(100000, {"get", "leases.coordination.k8s.io"}, 500);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.keep_renewing());
  // A lower bound is the property itself (a loaded machine only makes it later): leadership is not given up before
  // the renew deadline (500 ms) has passed; there is no upper bound.
  EXPECT_GE(std::chrono::steady_clock::now() - started, 500ms) << "failures within the renew deadline are retried";
  EXPECT_GE(server_->faults().count("get", "leases.coordination.k8s.io"), 3);
  EXPECT_FALSE(a.is_leader());
}

TEST_F(LeaderElectionTest, StopEndsAnAcquireThatIsWaiting) {
  LeaderElector a(*client_, options("a", 60s));
  ASSERT_TRUE(a.acquire());
  LeaderElector b(*client_, options("b", 60s));
  auto standby = std::async(std::launch::async, [&] { return b.acquire(); });
  StopOnExit stop_b{b};
  ASSERT_TRUE(read_the_lease(3)) << "the standby never polled the lease";
  b.stop();
  ASSERT_EQ(standby.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(standby.get());
  EXPECT_FALSE(b.is_leader());
  EXPECT_EQ(holder(), "a");
}

TEST_F(LeaderElectionTest, AFailingServerIsRetriedUntilTheLeaseIsCreated) {
  auto client = make_client([] {
    ClientOptions o = test::fast_client_options();
    o.max_retries = 0;
    return o;
  }());
  server_->faults().fail_next(3, {"create", "leases.coordination.k8s.io"}, 500);
  LeaderElector a(*client, options("a"));
  EXPECT_TRUE(a.acquire());
  EXPECT_EQ(server_->faults().count("create", "leases.coordination.k8s.io"), 4);
  EXPECT_EQ(holder(), "a");
}

}  // namespace
}  // namespace torus::kube

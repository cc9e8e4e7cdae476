// A rank's World on its own: its options from the developer tunables, the refusal of a non-positive timeout, and a
// rendezvous that a peer never joins failing with a Timeout that names the missing rank, the job and the attempt.
#include "worker/comm/world.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

TEST(World, OptionsTakeTheTunablesAndKeepTheirDefaultsOtherwise) {
  const WorldOptions o = WorldOptions::from_tunables(tunables::Snapshot::of(
      {{"TORUS_RENDEZVOUS_TIMEOUT_MS", "2500"}, {"TORUS_COMM_BIND_ADDR", "127.0.0.9"}, {"TORUS_COST_NET_GBPS", "2"}}));
  EXPECT_EQ(o.rendezvous_timeout, milliseconds(2500));
  EXPECT_EQ(o.bind_host, "127.0.0.9");
  EXPECT_DOUBLE_EQ(o.cost.net.bytes_per_s, 2e9);
  const WorldOptions defaults = WorldOptions::from_tunables(tunables::Snapshot{});
  EXPECT_EQ(defaults.rendezvous_timeout, WorldOptions{}.rendezvous_timeout);
  EXPECT_TRUE(defaults.shared_memory);
  EXPECT_EQ(defaults.shm_slot_bytes, WorldOptions{}.shm_slot_bytes);
  EXPECT_DOUBLE_EQ(defaults.cost.net.bytes_per_s, CostModel{}.net.bytes_per_s);
  EXPECT_EQ(defaults.bind_host, "") << "empty: the World picks the rank environment's bind address";
}

TEST(World, RefusesANonPositiveCollectiveTimeout) {
  WorldOptions o = testing::test_options();
  o.timeout = milliseconds(0);
  EXPECT_THROW(make_world(testing::sim_env(0, 1, 1, 1, testing::test_name()), o), InvalidArgument);
}

TEST(World, ARendezvousAPeerNeverJoinsNamesTheMissingRank) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  WorldOptions o = testing::test_options();
  o.rendezvous_timeout = milliseconds(300);
  RankEnv env = testing::sim_env(0, 1, 2, server.port(), testing::test_name());
  env.attempt = 3;
  try {
    make_world(env, o);
    FAIL() << "expected Timeout";
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("rendezvous: ranks 1 of 2 did not join job " + env.job_name +
                                         " attempt 3 within 300 ms"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace torus::comm

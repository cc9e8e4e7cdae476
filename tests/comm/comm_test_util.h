#pragma once
// Helpers for multi-rank tests: ranks as threads over one store, simulated node groupings.
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/launch/rank_env.h"
#include "tests/support/run_ranks.h"
#include "worker/comm/world.h"

namespace torus::comm::testing {

using ::torus::test::run_ranks;

// Rank `rank` of `nodes` simulated nodes with `per_node` ranks each; node k is host "sim-node<k>".
inline RankEnv sim_env(int rank, int nodes, int per_node, int port, const std::string& job) {
  RankEnv e;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  e.world_size = nodes * per_node;
  e.rank = rank;
  e.local_world_size = per_node;
  e.local_rank = rank % per_node;
  e.node_rank = rank / per_node;
  e.node_name = "sim-node" + std::to_string(e.node_rank);
  e.job_name = job;
  e.secret = "test-secret";
  return e;
}

// The running test's name: a job name (store prefix) of its own, so tests never share keys.
inline std::string test_name() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

inline WorldOptions test_options() {
  WorldOptions o;
  o.timeout = std::chrono::milliseconds(20000);
  o.rendezvous_timeout = std::chrono::milliseconds(20000);
  o.on_timeout = TimeoutAction::kAbortCommunicator;
  o.store_serving = StoreServing::kExternal;
  o.shm_slot_bytes = 64 << 10;  // small windows: many windows per buffer even at modest sizes
  return o;
}

}  // namespace torus::comm::testing

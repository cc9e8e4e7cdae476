#pragma once
// Helpers for multi-rank tests: ranks as threads over one store, simulated node groupings.
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "worker/comm/rank_env.h"
#include "worker/comm/world.h"

namespace torus::comm::testing {

// Runs fn(rank) on `n` threads and rethrows the first failure once all have ended.
inline void run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

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

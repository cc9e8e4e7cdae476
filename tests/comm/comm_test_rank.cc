// A rank for the multi-process tests: builds the world from the rank environment exactly as torus-worker does,
// then runs all-reduces. TORUS_TEST_ITERATIONS (0 = until killed), TORUS_TEST_COUNT floats per all-reduce,
// TORUS_TEST_HANG_RANK / TORUS_TEST_HANG_AT: that rank stops (pause) before that iteration, like a hung process.
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "common/launch/rank_env.h"
#include "common/log/log.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/comm/world.h"

int main() {
  return torus::run_main("comm_test_rank", [] {
    using namespace torus::comm;
    RankEnv env = torus::launch::rank_env_from_environment();
    torus::log::set_tag("rank " + std::to_string(env.rank));
    WorldOptions options = WorldOptions::from_tunables();
    // The failure tests shorten the deadline as a developer would (a worker takes it from its job).
    if (auto ms = torus::tunables::process_snapshot().integer("TORUS_COMM_TIMEOUT_MS"))
      options.timeout = milliseconds(*ms);
    auto world = make_world(env, options);
    const int64_t iterations = torus::env::get_int_or("TORUS_TEST_ITERATIONS", 3);
    const auto count = static_cast<size_t>(torus::env::get_int_or("TORUS_TEST_COUNT", 100000));
    const int64_t hang_rank = torus::env::get_int_or("TORUS_TEST_HANG_RANK", -1);
    const int64_t hang_at = torus::env::get_int_or("TORUS_TEST_HANG_AT", 0);
    std::vector<float> v(count);
    for (int64_t it = 0; iterations == 0 || it < iterations; ++it) {
      if (env.rank == hang_rank && it == hang_at) {
        std::printf("hanging\n");
        std::fflush(stdout);
        for (;;) pause();  // a hung process: alive, never arrives
      }
      for (auto& x : v) x = static_cast<float>(env.rank + 1);
      world->comm().all_reduce(view_of(std::span<float>(v))).wait(world->timeout() * 4);
      const float expected = static_cast<float>(env.world_size * (env.world_size + 1) / 2);
      if (v.front() != expected || v.back() != expected)
        throw torus::CorruptData("all-reduce result " + std::to_string(v.front()) + ", expected " +
                                 std::to_string(expected));
      std::printf("iteration %lld ok\n", static_cast<long long>(it));
      std::fflush(stdout);
    }
    return 0;
  });
}

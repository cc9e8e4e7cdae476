// Multi-process tests: real ranks (comm_test_rank) under the process supervisor. A rank that dies or hangs makes
// the others fail with a clear error within the timeout; a wrong secret is refused; a late rank 0 is waited for.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/launch/exit_codes.h"
#include "common/process/supervisor.h"
#include "worker/comm/socket.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

int free_port() {
  Fd probe = listen_tcp("127.0.0.1", 0);
  return bound_port(probe);
}

// A gang of comm_test_rank processes with their output captured per rank.
class Gang {
 public:
  Gang() : supervisor_([this](size_t i, process::Stream, std::string_view line) { on_line(i, line); }) {}

  size_t start(int rank, int world, int per_node, int port, std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> env = {{"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", std::to_string(port)},
                                              {"WORLD_SIZE", std::to_string(world)},
                                              {"RANK", std::to_string(rank)},
                                              {"LOCAL_WORLD_SIZE", std::to_string(per_node)},
                                              {"LOCAL_RANK", std::to_string(rank % per_node)},
                                              {"NODE_RANK", std::to_string(rank / per_node)},
                                              {"TORUS_NODE_NAME", "sim-node" + std::to_string(rank / per_node)},
                                              {"TORUS_JOB_NAME", "failtest"},
                                              {"TORUS_RENDEZVOUS_SECRET", "gang-secret"},
                                              {"TORUS_COMM_TIMEOUT_MS", "1500"},
                                              {"TORUS_RENDEZVOUS_TIMEOUT_MS", "10000"},
                                              {"TORUS_SHM_SLOT_BYTES", "65536"}};
    for (auto& [k, v] : extra) env[k] = v;
    const size_t index = supervisor_.start({"rank " + std::to_string(rank), {COMM_TEST_RANK}, env});
    std::lock_guard lock(mu_);
    rank_of_[index] = rank;
    return index;
  }

  // Pumps output until `pred` holds or `timeout` passes; collects terminations on the way.
  bool await(const std::function<bool()>& pred, milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!locked(pred)) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      auto t = supervisor_.wait_any(std::min(left, milliseconds(100)));
      if (t) {
        std::lock_guard lock(mu_);
        exits_[rank_of_[t->index]] = *t;
      }
    }
    return true;
  }

  bool exited(int rank) {
    std::lock_guard lock(mu_);
    return exits_.count(rank) > 0;
  }
  process::Termination exit_of(int rank) {
    std::lock_guard lock(mu_);
    return exits_.at(rank);
  }
  std::string output(int rank) {
    std::lock_guard lock(mu_);
    return output_[rank];
  }
  bool printed(int rank, const std::string& needle) { return output(rank).find(needle) != std::string::npos; }
  process::Supervisor& supervisor() { return supervisor_; }

 private:
  bool locked(const std::function<bool()>& pred) { return pred(); }
  void on_line(size_t index, std::string_view line) {
    std::lock_guard lock(mu_);
    output_[rank_of_[index]] += std::string(line) + "\n";
  }

  std::mutex mu_;
  std::map<size_t, int> rank_of_;
  std::map<int, std::string> output_;
  std::map<int, process::Termination> exits_;
  process::Supervisor supervisor_;
};

void expect_retryable_failure(Gang& g, int rank) {
  ASSERT_TRUE(g.exited(rank));
  const int code = g.exit_of(rank).shell_code();
  EXPECT_TRUE(code == to_int(launch::ExitCode::kRetryable) || code == to_int(launch::ExitCode::kCollectiveTimeout))
      << "rank " << rank << " exited " << code << "\n"
      << g.output(rank);
}

void killed_peer_case(int world, int per_node) {
  Gang g;
  const int port = free_port();
  for (int r = 0; r < world; ++r) g.start(r, world, per_node, port, {{"TORUS_TEST_ITERATIONS", "0"}});
  ASSERT_TRUE(g.await([&] { return g.printed(world - 1, "iteration 3 ok"); }, milliseconds(60000)))
      << g.output(world - 1);
  g.supervisor().signal(1, SIGKILL);  // index 1 is rank 1
  ASSERT_TRUE(g.await(
      [&] {
        for (int r = 0; r < world; ++r)
          if (r != 1 && !g.exited(r)) return false;
        return true;
      },
      milliseconds(20000)))
      << "survivors still running after a peer was killed:\n"
      << g.output(0);
  // Promptness by mechanism, not by a wall-clock bound that a loaded machine breaks: each survivor's watchdog ended
  // it, either on the error its transport saw (the reset of the killed peer's connection) or at the collective
  // timeout of 1500 ms, never by waiting for a read that the dead peer would never answer.
  for (int r = 0; r < world; ++r) {
    if (r == 1) continue;
    expect_retryable_failure(g, r);
    const std::string& out = g.output(r);
    EXPECT_TRUE(out.find("watchdog: collective ") != std::string::npos &&
                (out.find(" failed on rank " + std::to_string(r)) != std::string::npos ||
                 out.find(" did not finish within 1500 ms") != std::string::npos))
        << out;
  }
}

TEST(Failure, KilledRankFailsTheOthersAcrossNodes) { killed_peer_case(3, 1); }

TEST(Failure, KilledRankFailsTheOthersOnOneHost) { killed_peer_case(2, 2); }

TEST(Failure, HungRankTriggersTheWatchdogNamingIt) {
  Gang g;
  const int port = free_port();
  for (int r = 0; r < 2; ++r)
    g.start(r, 2, 1, port,
            {{"TORUS_TEST_ITERATIONS", "0"}, {"TORUS_TEST_HANG_RANK", "1"}, {"TORUS_TEST_HANG_AT", "2"}});
  ASSERT_TRUE(g.await([&] { return g.exited(0); }, milliseconds(30000))) << g.output(0);
  EXPECT_EQ(g.exit_of(0).shell_code(), to_int(launch::ExitCode::kCollectiveTimeout)) << g.output(0);
  EXPECT_TRUE(g.printed(0, "all_reduce #3")) << g.output(0);
  EXPECT_TRUE(g.printed(0, "ranks that never arrived: 1")) << g.output(0);
}

TEST(Failure, WrongSecretIsRefusedAndTheJoinErrorNamesTheMissingRank) {
  Gang g;
  const int port = free_port();
  g.start(0, 2, 1, port, {{"TORUS_RENDEZVOUS_TIMEOUT_MS", "2000"}});
  g.start(1, 2, 1, port, {{"TORUS_RENDEZVOUS_SECRET", "guessed"}});
  ASSERT_TRUE(g.await([&] { return g.exited(0) && g.exited(1); }, milliseconds(30000)));
  EXPECT_NE(g.exit_of(1).shell_code(), 0);
  EXPECT_TRUE(g.printed(1, "refused this rank")) << g.output(1);
  EXPECT_TRUE(g.printed(0, "refused client")) << g.output(0);
  EXPECT_TRUE(g.printed(0, "ranks 1 of 2 did not join")) << g.output(0);
}

// Rank 0 comes up late: its port is held by a listener that is not a rendezvous store yet (it accepts and hangs up, as
// a port whose server is still starting does); rank 1 retries it, and rank 0 starts only once rank 1 has been turned
// away twice. No clock decides "late": rank 1's own attempts do.
TEST(Failure, LateRankZeroIsWaitedFor) {
  Gang g;
  Fd not_yet = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(not_yet);
  g.start(1, 2, 1, port);
  const auto knocking = [&] {
    pollfd p{not_yet.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  for (int turned_away = 0; turned_away < 2; ++turned_away) {
    ASSERT_TRUE(g.await([&] { return g.exited(1) || knocking(); }, milliseconds(30000))) << g.output(1);
    ASSERT_FALSE(g.exited(1)) << "rank 1 gave up on a rank 0 that was not up yet\n" << g.output(1);
    Fd conn(::accept4(not_yet.get(), nullptr, nullptr, SOCK_CLOEXEC));  // and hung up at once
    ASSERT_TRUE(conn.valid());
  }
  not_yet = Fd();  // the port is free for rank 0 (rank 1's connections meanwhile are refused, and retried)
  g.start(0, 2, 1, port);
  ASSERT_TRUE(g.await([&] { return g.exited(0) && g.exited(1); }, milliseconds(30000)));
  EXPECT_TRUE(g.exit_of(0).success()) << g.output(0);
  EXPECT_TRUE(g.exit_of(1).success()) << g.output(1);
  EXPECT_TRUE(g.printed(1, "iteration 2 ok"));
}

}  // namespace
}  // namespace torus::comm

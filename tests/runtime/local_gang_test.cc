// The local gang loop with real processes (/bin/sh stand-ins for workers that exit, crash or hang on cue).
#include "operator/runtime/local_gang.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <map>

namespace torus::runtime {
namespace {

using controller::Reason;
using controller::RestartPolicy;
using std::chrono::milliseconds;

struct Recorder : GangListener {
  std::vector<int> attempts;
  std::vector<std::pair<int, int>> exits;  // (rank, shell code)
  std::vector<std::string> lines;
  int restarts = 0;
  void on_attempt_start(int a) override { attempts.push_back(a); }
  void on_line(int rank, process::Stream, std::string_view line) override {
    lines.push_back(std::to_string(rank) + ":" + std::string(line));
  }
  void on_worker_exit(int rank, const process::Termination& t) override { exits.emplace_back(rank, t.shell_code()); }
  void on_restart(const controller::Decision&) override { ++restarts; }
};

// Each rank runs `scripts[rank]` with RANK and TORUS_ATTEMPT set.
GangLaunch launch_of(std::vector<std::string> scripts, RestartPolicy policy = RestartPolicy::kExitCode,
                     int backoff = 3) {
  GangLaunch l;
  l.world_size = static_cast<int>(scripts.size());
  l.policy.restart_policy = policy;
  l.policy.backoff_limit = backoff;
  l.stop_grace = milliseconds(2000);
  l.make_rank = [scripts](int rank, int attempt) {
    return process::ProcessSpec{"rank " + std::to_string(rank),
                                {"/bin/sh", "-c", scripts[static_cast<size_t>(rank)]},
                                {{"RANK", std::to_string(rank)}, {"TORUS_ATTEMPT", std::to_string(attempt)}}};
  };
  return l;
}

TEST(LocalGang, AllRanksSucceed) {
  Recorder r;
  auto out = run_local_gang(launch_of({"echo hi from $RANK", "echo hi from $RANK"}), r);
  EXPECT_EQ(out.phase, api::Phase::kSucceeded);
  EXPECT_EQ(out.attempts, 1);
  EXPECT_EQ(r.exits.size(), 2u);
  EXPECT_NE(std::find(r.lines.begin(), r.lines.end(), "1:hi from 1"), r.lines.end());
}

TEST(LocalGang, SigkilledRankRestartsTheWholeGangAsAttemptOne) {
  Recorder r;
  // Attempt 0: rank 1 is SIGKILLed (137, retryable) while rank 0 hangs; attempt 1: both succeed.
  auto out = run_local_gang(
      launch_of({"[ $TORUS_ATTEMPT = 0 ] && exec sleep 60; exit 0", "[ $TORUS_ATTEMPT = 0 ] && kill -9 $$; exit 0"}),
      r);
  EXPECT_EQ(out.phase, api::Phase::kSucceeded) << out.message;
  EXPECT_EQ(out.attempts, 2);
  EXPECT_EQ(r.attempts, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.restarts, 1);
  // Attempt 0's hanging rank 0 was stopped, not left behind.
  EXPECT_EQ(std::count_if(r.exits.begin(), r.exits.end(), [](auto& e) { return e.second == 137; }), 1);
  EXPECT_EQ(std::count_if(r.exits.begin(), r.exits.end(), [](auto& e) { return e.second == 128 + SIGTERM; }), 1);
}

TEST(LocalGang, PermanentFailureFailsAtOnceAndStopsTheOthers) {
  Recorder r;
  auto out = run_local_gang(launch_of({"exec sleep 60", "echo bad config >&2; exit 1"}), r);
  EXPECT_EQ(out.phase, api::Phase::kFailed);
  EXPECT_EQ(out.reason, Reason::kWorkerFailed);
  EXPECT_EQ(out.attempts, 1);
  EXPECT_NE(out.message.find("rank 1"), std::string::npos) << out.message;
  EXPECT_EQ(r.exits.size(), 2u);
}

TEST(LocalGang, AlwaysFailingRankExhaustsTheBackoffLimit) {
  Recorder r;
  auto out = run_local_gang(launch_of({"exit 0", "exit 42"}, RestartPolicy::kExitCode, /*backoff=*/2), r);
  EXPECT_EQ(out.phase, api::Phase::kFailed);
  EXPECT_EQ(out.reason, Reason::kBackoffLimitExceeded);
  EXPECT_EQ(out.attempts, 3);
  EXPECT_NE(out.message.find("backoff limit 2"), std::string::npos) << out.message;
}

TEST(LocalGang, NeverPolicyFailsOnARetryableExit) {
  Recorder r;
  auto out = run_local_gang(launch_of({"exit 0", "kill -9 $$"}, RestartPolicy::kNever), r);
  EXPECT_EQ(out.phase, api::Phase::kFailed);
  EXPECT_EQ(out.attempts, 1);
}

TEST(LocalGang, ActiveDeadlineFailsAHangingGang) {
  Recorder r;
  auto l = launch_of({"exec sleep 60", "exec sleep 60"});
  l.policy.active_deadline = std::chrono::seconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  auto out = run_local_gang(l, r);
  // The outcome, not a wall-time ceiling, says the deadline ended it: had the gang run out its 60 s sleeps, it would
  // have Succeeded. A broken deadline that hangs is ctest's TIMEOUT to catch.
  EXPECT_EQ(out.phase, api::Phase::kFailed);
  EXPECT_EQ(out.reason, Reason::kDeadlineExceeded);
  // A lower bound is a property (load only makes it later): the deadline counts from the start, never fires early.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, l.policy.active_deadline);
}

TEST(LocalGang, InterruptAsksWorkersToStopAndSuspends) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  struct Interrupter : Recorder {
    int fd = -1;
    void on_line(int rank, process::Stream s, std::string_view line) override {
      Recorder::on_line(rank, s, line);
      if (line == "ready" && ++ready == 2) (void)!::write(fd, "x", 1);  // Ctrl-C once both ranks are up
    }
    int ready = 0;
  } r;
  r.fd = p[1];
  auto l = launch_of({"trap 'echo checkpointed; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
                      "trap 'echo checkpointed; exit 0' TERM; echo ready; while :; do sleep 0.05; done"});
  l.interrupt_fd = p[0];
  auto out = run_local_gang(l, r);
  EXPECT_EQ(out.phase, api::Phase::kSuspended);
  EXPECT_EQ(std::count(r.lines.begin(), r.lines.end(), "0:checkpointed") +
                std::count(r.lines.begin(), r.lines.end(), "1:checkpointed"),
            2);
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace torus::runtime

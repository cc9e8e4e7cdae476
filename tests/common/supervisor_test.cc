#include "common/process/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace torus::process {
namespace {

using std::chrono::milliseconds;

struct Captured {
  std::mutex mu;
  std::vector<std::string> out, err;
  Supervisor::LineHandler handler() {
    return [this](size_t, Stream s, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu);
      (s == Stream::kStdout ? out : err).emplace_back(line);
    };
  }
};

ProcessSpec sh(const std::string& script, std::map<std::string, std::string> env = {}) {
  return ProcessSpec{"sh", {"/bin/sh", "-c", script}, std::move(env)};
}

TEST(Supervisor, DeliversLinesAndExitCode) {
  Captured cap;
  Supervisor sup(cap.handler());
  sup.start(sh("echo one; echo two; echo oops >&2; printf tail; exit 3"));
  auto t = sup.wait_any(milliseconds(10000));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->exit_code, 3);
  EXPECT_EQ(t->signal, 0);
  EXPECT_FALSE(t->success());
  EXPECT_EQ(cap.out, (std::vector<std::string>{"one", "two", "tail"}));
  EXPECT_EQ(cap.err, (std::vector<std::string>{"oops"}));
  EXPECT_EQ(sup.running(), 0u);
}

TEST(Supervisor, PassesEnvironmentOverrides) {
  Captured cap;
  Supervisor sup(cap.handler());
  sup.start(sh("echo rank=$RANK", {{"RANK", "5"}}));
  ASSERT_TRUE(sup.wait_any(milliseconds(10000)).has_value());
  EXPECT_EQ(cap.out, (std::vector<std::string>{"rank=5"}));
}

TEST(Supervisor, ReportsSignalAsShellCode) {
  Supervisor sup(nullptr);
  const size_t i = sup.start(sh("exec sleep 60"));
  sup.signal(i, SIGKILL);
  auto t = sup.wait_any(milliseconds(10000));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->signal, SIGKILL);
  EXPECT_EQ(t->shell_code(), 137);
  EXPECT_NE(t->describe().find("signal 9"), std::string::npos);
}

TEST(Supervisor, ExecFailureIsExitCode127) {
  Captured cap;
  Supervisor sup(cap.handler());
  sup.start(ProcessSpec{"missing", {"/nonexistent/torus-binary"}, {}});
  auto t = sup.wait_any(milliseconds(10000));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->exit_code, 127);
  ASSERT_FALSE(cap.err.empty());
  EXPECT_NE(cap.err[0].find("/nonexistent/torus-binary"), std::string::npos);
}

TEST(Supervisor, WaitAnyTimesOutWhileChildrenRun) {
  Supervisor sup(nullptr);
  sup.start(sh("exec sleep 60"));
  EXPECT_FALSE(sup.wait_any(milliseconds(50)).has_value());
  EXPECT_EQ(sup.running(), 1u);
}

// Blocks until `pid` has exited, leaving it unreaped (WNOWAIT), so the supervisor's next poll still sees it.
void wait_exited_unreaped(pid_t pid) {
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
}

// Two children that end before one poll: that poll reaps both, wait_any returns one, and running() still
// counts the other, so a caller's `while (running() > 0)` loop gets both (with a count of live children only, such
// a loop lost the second of two pods that ended together).
TEST(Supervisor, RunningCountsTerminationsReapedButNotYetReturned) {
  Supervisor sup(nullptr);
  const pid_t a = sup.pid(sup.start(sh("exit 3")));
  const pid_t b = sup.pid(sup.start(sh("exit 4")));
  wait_exited_unreaped(a);
  wait_exited_unreaped(b);
  std::map<size_t, int> codes;
  while (sup.running() > 0) {
    auto t = sup.wait_any(milliseconds(10000));
    ASSERT_TRUE(t.has_value());
    codes[t->index] = t->exit_code;
    EXPECT_EQ(sup.running(), 2u - codes.size());
  }
  EXPECT_EQ(codes, (std::map<size_t, int>{{0, 3}, {1, 4}}));
}

TEST(Supervisor, StopAllEscalatesToKillForChildrenIgnoringTerm) {
  Captured cap;
  Supervisor sup(cap.handler());
  sup.start(sh("trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done"));  // handles TERM, keeps going
  sup.start(sh("exec sleep 60"));                                                    // dies on TERM
  // Wait until the trap is installed: the child says so.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(cap.mu);
      if (!cap.out.empty()) break;
    }
    sup.wait_any(milliseconds(20));
  }
  auto ends = sup.stop_all(milliseconds(300));
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(sup.running(), 0u);
  int killed = 0, termed = 0;
  for (const auto& t : ends) {
    killed += t.signal == SIGKILL;
    termed += t.signal == SIGTERM;
  }
  EXPECT_EQ(killed, 1);
  EXPECT_EQ(termed, 1);
}

TEST(Supervisor, DestructorLeavesNoChildBehind) {
  pid_t pid;
  {
    Supervisor sup(nullptr);
    pid = sup.pid(sup.start(sh("exec sleep 60")));
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped and gone
}

}  // namespace
}  // namespace torus::process

namespace torus::process {
namespace {

TEST(Supervisor, WakeupFdEndsWaitEarly) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Supervisor sup(nullptr);
  sup.set_wakeup_fd(p[0]);
  sup.start(ProcessSpec{"sleeper", {"/bin/sh", "-c", "exec sleep 60"}, {}});
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  // No wall-time ceiling: the wait's own timeout (an hour) is beyond ctest's TIMEOUT, so only the wakeup can end it
  // in time, and had the wakeup been missed the sleeper's end (60 s) would come back instead of nothing.
  EXPECT_FALSE(sup.wait_any(std::chrono::hours(1)).has_value());
  EXPECT_EQ(sup.running(), 1u) << "the sleeper is still running: the wait ended for the wakeup, not for a child";
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace torus::process

// SIGINT and SIGTERM as reads on a file descriptor: while an InterruptFd lives, either signal leaves the process
// running and makes the fd readable until consumed; the signal mask is restored when it goes.
#include "common/process/interrupt_fd.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <csignal>

namespace torus::process {
namespace {

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

bool blocked(int signo) {
  sigset_t now;
  ::sigprocmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, signo) == 1;
}

TEST(InterruptFd, EitherSignalIsOneReadableWakeupUntilConsumed) {
  const InterruptFd interrupts;
  ASSERT_GE(interrupts.fd(), 0);
  EXPECT_FALSE(readable(interrupts.fd(), 0));
  for (int signo : {SIGTERM, SIGINT}) {
    ASSERT_EQ(::raise(signo), 0);  // blocked: queued for the fd, not delivered (it would end this test binary)
    EXPECT_TRUE(readable(interrupts.fd(), 10000)) << signo;
    interrupts.consume();
    EXPECT_FALSE(readable(interrupts.fd(), 0)) << "one wakeup per signal: " << signo;
  }
}

TEST(InterruptFd, TheSignalMaskIsRestoredWhenItGoes) {
  const bool int_before = blocked(SIGINT), term_before = blocked(SIGTERM);
  {
    const InterruptFd interrupts;
    EXPECT_TRUE(blocked(SIGINT));
    EXPECT_TRUE(blocked(SIGTERM));
  }
  EXPECT_EQ(blocked(SIGINT), int_before);
  EXPECT_EQ(blocked(SIGTERM), term_before);
}

}  // namespace
}  // namespace torus::process

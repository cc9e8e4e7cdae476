#pragma once
// SIGINT and SIGTERM as a readable file descriptor: blocks both signals for the process and reads them from a
// signalfd, so a supervisor's wait (Supervisor::set_wakeup_fd) wakes on Ctrl-C or pod deletion without a handler.
// Children started afterwards get the signals unblocked again (the supervisor resets the mask before exec).
#include <signal.h>

namespace torus::process {

class InterruptFd {
 public:
  InterruptFd();
  ~InterruptFd();  // restores the signal mask
  InterruptFd(const InterruptFd&) = delete;
  InterruptFd& operator=(const InterruptFd&) = delete;
  int fd() const { return fd_; }
  // Reads whatever the fd holds; one wakeup, one interrupt.
  void consume() const;

 private:
  sigset_t set_{}, old_{};
  int fd_ = -1;
};

}  // namespace torus::process

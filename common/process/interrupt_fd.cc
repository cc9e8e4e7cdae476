#include "common/process/interrupt_fd.h"

#include <sys/signalfd.h>
#include <unistd.h>

namespace torus::process {

InterruptFd::InterruptFd() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &set_, &old_);
  fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
}

InterruptFd::~InterruptFd() {
  if (fd_ >= 0) ::close(fd_);
  ::sigprocmask(SIG_SETMASK, &old_, nullptr);
}

void InterruptFd::consume() const {
  char buf[sizeof(signalfd_siginfo)];
  (void)!::read(fd_, buf, sizeof(buf));
}

}  // namespace torus::process

#include "common/process/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/util/error.h"

extern char** environ;

namespace torus::process {

struct Supervisor::Child {
  std::string name;
  pid_t pid = -1;
  int pidfd = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out_buf;
  std::string err_buf;
  bool running = true;
};

namespace {

// glibc 2.36's <sys/pidfd.h> lacks C linkage for C++; the raw system call is stable.
int open_pidfd(pid_t pid) noexcept { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// NAME=VALUE strings: the parent's environment (unless kExact) with `overrides` applied.
std::vector<std::string> merged_environment(const std::map<std::string, std::string>& overrides,
                                            ProcessSpec::Environment environment) {
  std::vector<std::string> out;
  for (char** e = environment == ProcessSpec::Environment::kExact ? nullptr : environ; e != nullptr && *e != nullptr;
       ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string_view::npos && overrides.count(std::string(kv.substr(0, eq)))) continue;
    out.emplace_back(kv);
  }
  for (const auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string Termination::describe() const {
  if (signal != 0) return std::string("killed by signal ") + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exited with code " + std::to_string(exit_code);
}

Supervisor::Supervisor(LineHandler on_line) : on_line_(std::move(on_line)) {}

Supervisor::~Supervisor() {
  for (auto& c : children_) {
    if (c.running) {
      ::kill(c.pid, SIGKILL);
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      c.running = false;
    }
    close_fd(c.pidfd);
    close_fd(c.out_fd);
    close_fd(c.err_fd);
  }
}

size_t Supervisor::start(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw InvalidArgument("process '" + spec.name + "': empty command line");
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> envs = merged_environment(spec.env, spec.environment);
  std::vector<char*> argv = c_strings(args);
  std::vector<char*> envp = c_strings(envs);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("pipe for " + spec.name);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw_errno("pipe for " + spec.name);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork for " + spec.name);
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    sigset_t none;  // a supervisor may block signals to read them from a signalfd: children start clean
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::setpgid(0, 0);  // Ctrl-C on the terminal reaches the supervisor only; it decides how to stop the gang
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* msg = "exec failed: ";
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    (void)!::write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  Child child;
  child.name = spec.name;
  child.pid = pid;
  child.out_fd = out[0];
  child.err_fd = err[0];
  ::fcntl(child.out_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(child.err_fd, F_SETFL, O_NONBLOCK);
  child.pidfd = open_pidfd(pid);
  if (child.pidfd < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    close_fd(child.out_fd);
    close_fd(child.err_fd);
    throw_errno("pidfd_open for " + spec.name);
  }
  children_.push_back(std::move(child));
  return children_.size() - 1;
}

void Supervisor::deliver_line(size_t index, Stream stream, std::string& buffer, bool flush_partial) {
  size_t start = 0;
  for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n', start)) {
    if (on_line_) on_line_(index, stream, std::string_view(buffer).substr(start, nl - start));
    start = nl + 1;
  }
  buffer.erase(0, start);
  if (flush_partial && !buffer.empty()) {
    if (on_line_) on_line_(index, stream, buffer);
    buffer.clear();
  }
}

void Supervisor::drain(Child& child, Stream stream) {
  int& fd = stream == Stream::kStdout ? child.out_fd : child.err_fd;
  std::string& buf = stream == Stream::kStdout ? child.out_buf : child.err_buf;
  const size_t index = static_cast<size_t>(&child - children_.data());
  char chunk[65536];
  while (fd >= 0) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      deliver_line(index, stream, buf, /*flush_partial=*/false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    deliver_line(index, stream, buf, /*flush_partial=*/true);  // EOF or error: the pipe is done
    close_fd(fd);
  }
}

std::optional<Termination> Supervisor::reap(Child& child) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(child.pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != child.pid) return std::nullopt;
  child.running = false;
  close_fd(child.pidfd);
  // The child is gone; whatever it wrote is in the pipes (unless a grandchild keeps them open).
  drain(child, Stream::kStdout);
  drain(child, Stream::kStderr);
  Termination t;
  t.index = static_cast<size_t>(&child - children_.data());
  t.pid = child.pid;
  if (WIFSIGNALED(status)) t.signal = WTERMSIG(status);
  if (WIFEXITED(status)) t.exit_code = WEXITSTATUS(status);
  return t;
}

bool Supervisor::pump(std::chrono::milliseconds timeout) {
  enum class SourceKind { kPid, kOut, kErr };
  struct Source {
    Child* child;
    SourceKind kind;
  };
  std::vector<pollfd> fds;
  std::vector<Source> sources;
  if (wakeup_fd_ >= 0) {
    fds.push_back({wakeup_fd_, POLLIN, 0});
    sources.push_back({nullptr, SourceKind::kPid});
  }
  for (auto& c : children_) {
    if (c.running) {
      fds.push_back({c.pidfd, POLLIN, 0});
      sources.push_back({&c, SourceKind::kPid});
    }
    if (c.out_fd >= 0) {
      fds.push_back({c.out_fd, POLLIN, 0});
      sources.push_back({&c, SourceKind::kOut});
    }
    if (c.err_fd >= 0) {
      fds.push_back({c.err_fd, POLLIN, 0});
      sources.push_back({&c, SourceKind::kErr});
    }
  }
  if (fds.empty()) return true;
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n < 0) {
    if (errno == EINTR) return true;
    throw_errno("poll on worker processes");
  }
  bool woken = false;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    if (sources[i].child == nullptr) {
      woken = true;
      continue;
    }
    Child& c = *sources[i].child;
    switch (sources[i].kind) {
      case SourceKind::kOut:
        drain(c, Stream::kStdout);
        break;
      case SourceKind::kErr:
        drain(c, Stream::kStderr);
        break;
      case SourceKind::kPid:
        if (c.running) {
          if (auto t = reap(c)) finished_.push_back(*t);
        }
        break;
    }
  }
  return !woken;
}

std::optional<Termination> Supervisor::wait_any(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!finished_.empty()) {
      Termination t = finished_.front();
      finished_.erase(finished_.begin());
      return t;
    }
    if (running() == 0) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    if (!pump(left) && finished_.empty()) return std::nullopt;
  }
}

void Supervisor::signal(size_t index, int signo) {
  Child& c = children_.at(index);
  if (c.running) ::kill(c.pid, signo);
}

void Supervisor::signal_all(int signo) {
  for (size_t i = 0; i < children_.size(); ++i) signal(i, signo);
}

std::vector<Termination> Supervisor::stop_all(std::chrono::milliseconds grace) {
  std::vector<Termination> out;
  signal_all(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (running() > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (auto t = wait_any(left)) out.push_back(*t);
  }
  signal_all(SIGKILL);
  while (running() > 0) {
    if (auto t = wait_any(std::chrono::milliseconds(1000))) out.push_back(*t);
  }
  return out;
}

size_t Supervisor::running() const {
  size_t n = finished_.size();
  for (const auto& c : children_) n += c.running ? 1 : 0;
  return n;
}

pid_t Supervisor::pid(size_t index) const { return children_.at(index).pid; }

}  // namespace torus::process

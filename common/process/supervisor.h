#pragma once
// The one process supervisor of the code base: `torus run` starts a gang of worker processes with it, and
// `torus-worker` starts its local ranks with it when a pod runs several processes (processesPerWorker > 1).
//
// It starts children with piped stdout/stderr, hands every output line to a callback (so callers can prefix
// it by rank or parse it), reports exits as they happen (pidfd + poll: no sleeps, no busy waits), forwards
// signals, and never leaves a child behind: children die with the supervisor's process (PR_SET_PDEATHSIG)
// and the destructor kills and reaps whatever is still running.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torus::process {

struct ProcessSpec {
  std::string name;                        // for messages, e.g. "rank 3"
  std::vector<std::string> argv;           // argv[0] is the program (absolute path, or looked up in PATH)
  std::map<std::string, std::string> env;  // added to (and overriding) the supervisor's environment
  // kExact: `env` alone, nothing of the supervisor's (a container's environment is its image's and its pod's).
  enum class Environment { kInherit, kExact } environment = Environment::kInherit;
};

enum class Stream { kStdout, kStderr };

// How a child ended: exited with a code, or killed by a signal.
struct Termination {
  size_t index = 0;  // as returned by start()
  pid_t pid = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // non-zero when killed by a signal

  bool success() const { return signal == 0 && exit_code == 0; }
  // The shell convention (128 + signal) used by Kubernetes' container exit codes.
  int shell_code() const { return signal != 0 ? 128 + signal : exit_code; }
  std::string describe() const;
};

class Supervisor {
 public:
  using LineHandler = std::function<void(size_t index, Stream stream, std::string_view line)>;

  explicit Supervisor(LineHandler on_line);
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  ~Supervisor();  // SIGKILLs and reaps every child still running; never throws

  // Starts a child; returns its index. Throws SystemError when fork/exec fails (exec failure is reported
  // as exit code 127 of the child, like a shell).
  size_t start(const ProcessSpec& spec);

  // Pumps output and returns the next child that ended, or nullopt when `timeout` passes first, no child
  // is running, or the wakeup fd became readable. Output lines are delivered through the handler from this
  // call (the caller's thread). The handler must not call start().
  std::optional<Termination> wait_any(std::chrono::milliseconds timeout);

  // A file descriptor (e.g. a signalfd or a self-pipe) whose readability ends wait_any() early, so a caller
  // can react to Ctrl-C without polling. -1 disables. The supervisor never reads it.
  void set_wakeup_fd(int fd) { wakeup_fd_ = fd; }

  void signal(size_t index, int signo);
  void signal_all(int signo);
  // SIGTERM to all, then SIGKILL to whatever is left after `grace`; reaps everything. Returns the terminations.
  std::vector<Termination> stop_all(std::chrono::milliseconds grace);

  // Children whose end wait_any() has not returned yet: those running and those reaped but not yet returned.
  // One poll can reap several children, so a loop on `running() > 0` sees every termination.
  size_t running() const;
  pid_t pid(size_t index) const;

 private:
  struct Child;
  // Returns false when the wakeup fd fired.
  bool pump(std::chrono::milliseconds timeout);
  void drain(Child& child, Stream stream);
  void deliver_line(size_t index, Stream stream, std::string& buffer, bool flush_partial);
  std::optional<Termination> reap(Child& child);

  LineHandler on_line_;
  std::vector<Child> children_;
  std::vector<Termination> finished_;  // reaped but not yet returned by wait_any
  int wakeup_fd_ = -1;
};

}  // namespace torus::process

#pragma once
// The collective watchdog: every collective queued on a watched communicator has a sequence number and a deadline.
// One watchdog watches several communicators (the world's, the NCCL gradient path's), each under its own name and
// numbering its collectives on its own: sequences of different communicators are never compared. Each rank
// publishes the highest sequence it has started on each communicator under "progress/<name>/<rank>" in the store (a
// few times a second, from this thread, never on the collective's path). When a collective passes its deadline the
// watchdog logs which one (communicator, sequence, size, algorithm) and which ranks never arrived at it (their
// progress on that communicator is below its sequence), aborts the communicator and, in production, exits with
// ExitCode::kCollectiveTimeout (retryable: the gang restarts from its checkpoint) within `abort_grace` whether or not
// the abort returns: ncclCommAbort waits for the kernels queued before it, so behind a hung kernel (or while a
// captured CUDA graph holds the communicator, TORUS_NCCL_GRAPHS=1) it never returns, and the exit must not wait for it.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/launch/exit_codes.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {

enum class TimeoutAction {
  kExitProcess,        // production: log, abort (for abort_grace at most), exit 43
  kAbortCommunicator,  // tests: log, abort; the collective's Work fails with Timeout
};

// The exit code of a rank whose collective failed with `error`: kFailure (permanent) for a fault of this rank's own
// device (worker::cuda::DeviceFault: a kernel bug restarts into the same fault), kRetryable for anything else (a peer
// died, the network broke, the GPU's hardware failed, torus::HardwareFault: the gang restarts from its checkpoint).
launch::ExitCode failure_exit_code(const std::exception_ptr& error);

class Watchdog {
 public:
  // How long kExitProcess lets a timed-out communicator's abort run before it exits without it. An abort that can
  // return does so at once (a socket closed, NCCL's proxy joined: well under a second); one that waits for a hung
  // kernel never does. The abort only tidies up before the exit (the process's end closes every connection anyway).
  static constexpr milliseconds kAbortGrace{5000};

  // `timeout` is the watchdog's deadline per collective; backends get a longer one of their own, so a hung peer is
  // reported here (with the ranks that never arrived) before a backend's bare "read timeout".
  Watchdog(int rank, int world_size, std::shared_ptr<Store> store, TimeoutAction action, milliseconds timeout,
           milliseconds publish_interval = milliseconds(200), milliseconds abort_grace = kAbortGrace);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void started(Communicator* comm, const std::shared_ptr<detail::WorkState>& work);
  void finished(const detail::WorkState* work);
  // A collective failed on its own (a peer died: connection reset). Production: log and exit with
  // failure_exit_code(error).
  void failed(const detail::WorkState* work, const std::exception_ptr& error);
  milliseconds timeout() const { return timeout_; }
  // Called on the watchdog's thread right before it exits the process (kExitProcess): the rank's last words to its
  // supervisor (the step it had finished, for the lost-work ledger). Must not block on the training thread.
  void set_last_words(std::function<void()> last_words);

  // Ranks whose published progress on `communicator` is below `sequence` (or that never published one): who never
  // arrived.
  std::vector<int> ranks_behind(const std::string& communicator, uint64_t sequence);
  // Every timeout and failure report so far, one per line (tests, diagnostics).
  std::string reports() const;

 private:
  struct Entry {
    Communicator* comm;
    std::shared_ptr<detail::WorkState> work;
    Clock::time_point deadline;
  };
  // This rank's progress on one communicator: the highest sequence started, and the one last in the store.
  struct Progress {
    uint64_t started = 0;
    uint64_t published = 0;
  };
  void loop();
  void say_last_words();
  // " (pod P, node N)" of a rank, from what it published when it joined; "" when unknown.
  std::string where(int rank);
  void publish_progress();
  void fire(const Entry& entry);
  // kExitProcess after a timeout: the communicator's abort, for abort_grace_ at most, then exit 43.
  [[noreturn]] void abort_and_exit(Communicator* comm, const std::string& report);

  int rank_;
  int world_size_;
  std::shared_ptr<Store> store_;
  TimeoutAction action_;
  std::function<void()> last_words_;  // guarded by mu_
  milliseconds timeout_;
  milliseconds publish_interval_;
  milliseconds abort_grace_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<const detail::WorkState*, Entry> in_flight_;
  std::map<std::string, Progress> progress_;  // per communicator name
  std::vector<std::string> reports_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace torus::comm

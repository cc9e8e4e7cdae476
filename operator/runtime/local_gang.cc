#include "operator/runtime/local_gang.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include "common/log/log.h"
#include "common/util/error.h"
#include "common/util/main_guard.h"

namespace torus::runtime {
namespace {

using controller::Clock;
using controller::PodPhase;
using controller::Verdict;
using controller::WorkerState;
using std::chrono::milliseconds;

// Reads whatever the interrupt fd holds (a signalfd siginfo, or bytes in a test pipe); one wakeup, one interrupt.
void consume_interrupt(int fd) {
  char buf[128];
  (void)!::read(fd, buf, sizeof(buf));
}

class Attempt {
 public:
  Attempt(const GangLaunch& launch, GangListener& listener, int attempt)
      : launch_(launch),
        listener_(listener),
        number_(attempt),
        sup_([this](size_t i, process::Stream s, std::string_view line) {
          remember_error(i, line);
          listener_.on_line(static_cast<int>(i), s, line);
        }) {
    sup_.set_wakeup_fd(launch.interrupt_fd);
    workers_.resize(static_cast<size_t>(launch.world_size));
    errors_.resize(static_cast<size_t>(launch.world_size));
    for (int rank = 0; rank < launch.world_size; ++rank) {
      process::ProcessSpec spec = launch.make_rank(rank, attempt);
      workers_[static_cast<size_t>(rank)].name = spec.name.empty() ? "rank " + std::to_string(rank) : spec.name;
      sup_.start(spec);
      workers_[static_cast<size_t>(rank)].phase = PodPhase::kRunning;
    }
    started_ = Clock::now();
  }

  Clock::time_point started() const { return started_; }
  process::Supervisor& supervisor() { return sup_; }

  void record(const process::Termination& t) {
    WorkerState& w = workers_.at(t.index);
    if (t.signal != 0) {
      w.term_signal = t.signal;
    } else {
      w.exit_code = t.exit_code;
    }
    w.phase = t.success() ? PodPhase::kSucceeded : PodPhase::kFailed;
    if (!t.success()) w.detail = error_of(t.index);  // the rank's own words, quoted in the failure reason
    listener_.on_worker_exit(static_cast<int>(t.index), t);
  }

  controller::GangObservation observe(Clock::time_point job_start) const {
    controller::GangObservation g;
    g.expected_workers = launch_.world_size;
    g.workers = workers_;
    g.attempt = number_;
    g.restarts = number_;  // locally every attempt after the first follows a failure
    g.job_start = job_start;
    g.attempt_start = started_;
    g.running_since = started_;  // local processes run as soon as they are started
    g.now = Clock::now();
    return g;
  }

  void stop() {
    for (const auto& t : sup_.stop_all(launch_.stop_grace)) record(t);
  }

 private:
  // The last error a rank wrote: its final run_main reason wins over earlier logged errors.
  void remember_error(size_t rank, std::string_view line) {
    auto reason = parse_error_line(line);
    if (!reason) return;
    std::lock_guard lock(errors_mu_);
    ErrorReason& kept = errors_.at(rank);
    if (kept.text.empty() || reason->kind == ErrorLine::kFinal || kept.kind != ErrorLine::kFinal) kept = *reason;
  }
  std::string error_of(size_t rank) {
    std::lock_guard lock(errors_mu_);
    return errors_.at(rank).text;
  }

  const GangLaunch& launch_;
  GangListener& listener_;
  std::mutex errors_mu_;
  std::vector<ErrorReason> errors_;
  int number_;
  process::Supervisor sup_;
  std::vector<WorkerState> workers_;
  Clock::time_point started_;
};

milliseconds next_wait(const GangLaunch& launch, const controller::Decision& d) {
  milliseconds wait = launch.tick;
  if (d.recheck_after) wait = std::min(wait, std::chrono::duration_cast<milliseconds>(*d.recheck_after));
  return std::max(wait, milliseconds(1));
}

// Ctrl-C: the first asks every worker to checkpoint and stop (SIGTERM), the second kills them.
GangOutcome interrupted(Attempt& attempt, GangListener& listener, int attempt_number, const GangLaunch& launch) {
  listener.on_interrupt(1);
  process::Supervisor& sup = attempt.supervisor();
  sup.signal_all(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + launch.stop_grace;
  while (sup.running() > 0) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (auto t = sup.wait_any(left)) {
      attempt.record(*t);
    } else if (sup.running() > 0 && std::chrono::steady_clock::now() < deadline) {
      consume_interrupt(launch.interrupt_fd);  // a second Ctrl-C
      listener.on_interrupt(2);
      break;
    }
  }
  attempt.stop();
  return GangOutcome{api::Phase::kSuspended, controller::Reason::kNone,
                     "interrupted: workers were asked to checkpoint and stop; run again with --resume to continue",
                     attempt_number + 1};
}

}  // namespace

GangOutcome run_local_gang(const GangLaunch& launch, GangListener& listener) {
  if (launch.world_size < 1)
    throw InvalidArgument("world size must be at least 1, got " + std::to_string(launch.world_size));
  const Clock::time_point job_start = Clock::now();
  for (int number = 0;; ++number) {  // attempt 0 first, as the operator's status.attempt
    listener.on_attempt_start(number);
    Attempt attempt(launch, listener, number);
    for (;;) {
      const controller::Decision d = controller::decide(launch.policy, attempt.observe(job_start));
      if (d.verdict == Verdict::kSucceed) return GangOutcome{api::Phase::kSucceeded, d.reason, d.message, number + 1};
      if (d.verdict == Verdict::kFail) {
        attempt.stop();
        return GangOutcome{api::Phase::kFailed, d.reason, d.message, number + 1};
      }
      if (d.verdict == Verdict::kRestart) {
        listener.on_restart(d);
        attempt.stop();
        break;
      }
      auto ended = attempt.supervisor().wait_any(next_wait(launch, d));
      if (ended) {
        attempt.record(*ended);
        continue;
      }
      if (launch.interrupt_fd >= 0 && attempt.supervisor().running() > 0) {
        pollfd pfd{launch.interrupt_fd, POLLIN, 0};
        if (::poll(&pfd, 1, 0) == 1) {
          consume_interrupt(launch.interrupt_fd);
          return interrupted(attempt, listener, number, launch);
        }
      }
      listener.on_tick();
    }
  }
}

}  // namespace torus::runtime

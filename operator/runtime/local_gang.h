#pragma once
// Runs a gang of local worker processes under the same gang policy as the operator
// (operator/controller/gang_policy.h): a retryable failure restarts every rank as a new attempt, a permanent
// one fails the job, deadlines apply. Ctrl-C (the interrupt fd) asks workers to checkpoint and stop; a second
// one kills them.
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "common/process/supervisor.h"
#include "operator/controller/gang_policy.h"

namespace torus::runtime {

struct GangLaunch {
  int world_size = 1;
  // The command and environment of `rank` in `attempt` (0-based). Called once per rank per attempt.
  std::function<process::ProcessSpec(int rank, int attempt)> make_rank;
  controller::GangPolicy policy;
  std::chrono::milliseconds stop_grace{15000};  // SIGTERM -> SIGKILL when stopping a gang
  std::chrono::milliseconds tick{1000};         // how often on_tick runs while the gang runs
  int interrupt_fd = -1;                        // readable on Ctrl-C (a signalfd or a pipe); -1: none
};

struct GangOutcome {
  api::Phase phase = api::Phase::kFailed;  // the job's final phase: kSucceeded, kFailed or kSuspended (interrupted)
  controller::Reason reason = controller::Reason::kNone;
  std::string message;
  int attempts = 0;  // attempts started; restarts = attempts - 1
};

// What the caller wants to hear about while the gang runs. Every call comes from the run_local_gang thread.
class GangListener {
 public:
  virtual ~GangListener() = default;
  virtual void on_attempt_start(int /*attempt*/) {}  // 0-based: 0 first, 1 after the first restart
  virtual void on_line(int /*rank*/, process::Stream /*stream*/, std::string_view /*line*/) {}
  virtual void on_worker_exit(int /*rank*/, const process::Termination& /*how*/) {}
  virtual void on_restart(const controller::Decision& /*why*/) {}
  virtual void on_interrupt(int /*count*/) {}
  virtual void on_tick() {}
};

GangOutcome run_local_gang(const GangLaunch& launch, GangListener& listener);

}  // namespace torus::runtime

#include "worker/app/local_ranks.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::worker::app {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The local ranks' lines go to the pod's own stdout and stderr as they are, one whole line at a time.
void pass_through(process::Stream stream, std::string_view line) {
  std::FILE* out = stream == process::Stream::kStdout ? stdout : stderr;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fputc('\n', out);
  std::fflush(out);
}

bool readable(int fd) {
  if (fd < 0) return false;
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1;
}

void drain(int fd) {
  char buf[256];
  (void)!::read(fd, buf, sizeof(buf));
}

// Who bounds a stop: the pod itself (a local rank failed: the others are killed after the grace, so the pod ends
// and reports it), or the kubelet (the pod was asked to stop: its terminationGracePeriodSeconds, derived from the
// measured save time, ends it with SIGKILL, which PR_SET_PDEATHSIG carries to the local ranks; a shorter deadline of
// our own would cut the very checkpoint the grace was sized for).
enum class StopDeadline { kOwnGrace, kKubelets };

// Stopping the pod's local ranks: asked (SIGTERM), then killed when the deadline is ours and passes.
class Stopper {
 public:
  Stopper(process::Supervisor& sup, milliseconds grace) : sup_(sup), grace_(grace) {}

  void ask(const std::string& why, StopDeadline deadline) {
    if (stage_ != Stage::kRunning) return;
    TLOG(Warn) << why << ": asking the pod's local ranks to checkpoint and stop";
    sup_.signal_all(SIGTERM);
    stage_ = Stage::kAsked;
    kill_at_ = deadline == StopDeadline::kOwnGrace ? Clock::now() + grace_ : Clock::time_point::max();
  }
  // How long wait_any may block before the grace ends.
  milliseconds wait_budget() const {
    if (stage_ != Stage::kAsked || kill_at_ == Clock::time_point::max()) return std::chrono::hours(1);
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(kill_at_ - Clock::now()));
  }
  void kill_if_due() {
    if (stage_ != Stage::kAsked || Clock::now() < kill_at_) return;
    TLOG(Warn) << "local ranks still running " << grace_.count() << " ms after SIGTERM: killing them";
    kill_now();
  }
  void kill_now() {
    sup_.signal_all(SIGKILL);
    stage_ = Stage::kKilled;
  }
  bool asked() const { return stage_ != Stage::kRunning; }

 private:
  enum class Stage { kRunning, kAsked, kKilled };
  process::Supervisor& sup_;
  milliseconds grace_;
  Stage stage_ = Stage::kRunning;
  Clock::time_point kill_at_{};
};

}  // namespace

int pod_exit_code(const std::vector<process::Termination>& ended) {
  for (const process::Termination& t : ended) {
    if (!t.success()) return t.shell_code();
  }
  return 0;
}

int run_local_ranks(const launch::RankEnv& pod, const LocalRanksOptions& options) {
  if (pod.launch != launch::Launch::kLocalRanks)
    throw InvalidArgument("run_local_ranks: RANK " + std::to_string(pod.rank) + " is one rank, not a pod of ranks");
  process::Supervisor sup([](size_t, process::Stream s, std::string_view line) { pass_through(s, line); });
  sup.set_wakeup_fd(options.interrupt_fd);
  for (int local = 0; local < pod.local_world_size; ++local) {
    const launch::RankEnv rank = launch::local_rank_env(pod, local);
    sup.start({"local rank " + std::to_string(local), {options.worker_binary}, launch::to_process_env(rank)});
  }
  TLOG(Info) << "pod " << pod.node_rank << ": started local ranks " << pod.rank << ".."
             << pod.rank + pod.local_world_size - 1 << " of " << pod.world_size;
  std::vector<process::Termination> ended;
  Stopper stopper(sup, options.stop_grace);
  for (;;) {
    // Terminations already reaped come first: one poll can reap several ranks, and each one counts.
    if (auto t = sup.wait_any(stopper.wait_budget())) {
      ended.push_back(*t);
      if (!t->success()) {
        stopper.ask("local rank " + std::to_string(t->index) + " " + t->describe(), StopDeadline::kOwnGrace);
      }
      continue;
    }
    if (sup.running() == 0) break;
    stopper.kill_if_due();
    if (readable(options.interrupt_fd)) {
      drain(options.interrupt_fd);
      if (stopper.asked()) {
        stopper.kill_now();  // asked twice
      } else {
        stopper.ask("stop requested", StopDeadline::kKubelets);
      }
    }
  }
  return pod_exit_code(ended);
}

}  // namespace torus::worker::app

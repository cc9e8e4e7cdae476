#pragma once
// The in-pod supervisor. A pod of processesPerWorker = L gets the launch contract without RANK
// (common/launch/rank_env.h, Launch::kLocalRanks); its torus-worker starts the pod's L local ranks as child
// processes with the one process supervisor (common/process/supervisor.h): rank = NODE_RANK x L + local rank,
// LOCAL_RANK (one GPU each on GPU pods), the same rendezvous. Their output passes through unchanged (events
// included). SIGTERM or SIGINT is forwarded: the ranks checkpoint and stop. When one local rank fails, the others
// are stopped and the pod exits with that rank's code, so the gang policy sees one failure, as from a
// single-process pod.
#include <chrono>
#include <string>
#include <vector>

#include "common/launch/rank_env.h"
#include "common/process/supervisor.h"

namespace torus::worker::app {

struct LocalRanksOptions {
  std::string worker_binary;  // the torus-worker each local rank runs (this executable)
  // SIGTERM -> SIGKILL when a local rank failed and the others are stopped. A stop the pod was asked for (SIGTERM,
  // SIGINT) has no deadline of its own: the kubelet's grace period bounds it.
  std::chrono::milliseconds stop_grace{15000};
  int interrupt_fd = -1;  // readable on SIGTERM / SIGINT (a signalfd, or a pipe in tests); -1: none
};

// Runs the local ranks of `pod` (Launch::kLocalRanks) until all have ended; returns the pod's exit code.
int run_local_ranks(const launch::RankEnv& pod, const LocalRanksOptions& options);

// The exit code of a pod whose local ranks ended as `ended` (in the order they ended): 0 when all succeeded, else
// the first failure's, 128 + N for a signal, as a container's exit code reads.
int pod_exit_code(const std::vector<process::Termination>& ended);

}  // namespace torus::worker::app

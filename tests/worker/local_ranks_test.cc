// The in-pod supervisor (worker/app/local_ranks.h) with real torus-worker processes, each started the way a pod
// of processesPerWorker = 2 starts it (the launch contract without RANK): two such pods form a world of four and
// train; a local rank that dies ends its pod with that rank's code; SIGTERM makes every local rank checkpoint and
// stop.
#include "worker/app/local_ranks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "common/launch/exit_codes.h"
#include "common/process/worker_events.h"
#include "tests/support/eventually.h"
#include "tests/support/job_builder.h"
#include "tests/support/temp_dir.h"
#include "worker/comm/socket.h"

namespace torus::worker::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
const std::string kWorker = std::string(TORUS_BINARY_DIR) + "/bin/torus-worker";

std::string job_yaml(int epochs, const fs::path& checkpoints) {
  test::JobBuilder b("local-ranks");
  b.gang(2, 2).classes(4).synthetic(128, 32, 4).epochs(epochs).batch_size(32).one_cycle(0.1);
  b.checkpoints(checkpoints.string(), 2).spec().run_policy.restart_policy = api::RestartPolicy::kExitCode;
  return b.yaml();
}

// Pods of a gang as processes: torus-worker with a pod's launch contract, output captured per pod.
class Pods {
 public:
  Pods(const fs::path& dir, int epochs, int world) : world_(world) {
    job_file_ = (dir / "job.yaml").string();
    std::ofstream(job_file_) << job_yaml(epochs, dir / "ckpt");
    const comm::Fd probe = comm::listen_tcp("127.0.0.1", 0);
    port_ = comm::bound_port(probe);
  }

  // Pod `index` (of two local ranks) on its own loopback address, as the process kubelet gives pods.
  size_t start(int index) {
    launch::RankEnv pod;
    pod.launch = launch::Launch::kLocalRanks;
    pod.job_name = "local-ranks";
    pod.world_size = world_;
    pod.local_world_size = 2;
    pod.node_rank = index;
    pod.rank = index * 2;
    pod.job_file = job_file_;
    pod.master_addr = "127.0.0.1";
    pod.master_port = port_;
    pod.secret = "pods-secret";
    pod.node_name = "node-" + std::to_string(index);
    pod.bind_address = "127.0.0." + std::to_string(1 + index);
    pod.metrics_port = 0;
    auto env = launch::to_process_env(pod);
    env["OMP_WAIT_POLICY"] = "passive";
    env["TORUS_COMM_TIMEOUT_MS"] = "10000";
    return sup_.start({"pod " + std::to_string(index), {kWorker}, env});
  }

  // Waits (bounded) for every pod to end; returns the exit codes by pod.
  std::map<size_t, int> wait_all(std::chrono::seconds limit = 180s) {
    std::map<size_t, int> codes;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (sup_.running() > 0 && std::chrono::steady_clock::now() < deadline) {
      if (auto t = sup_.wait_any(1000ms)) codes[t->index] = t->shell_code();
    }
    return codes;
  }

  // Pumps output until an event of `type` arrives (bounded); false when the pods ended or time ran out first.
  bool wait_for_event(const std::string& type, std::chrono::seconds limit = 120s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (seen(type)) return true;
      if (sup_.running() == 0) return false;
      if (auto t = sup_.wait_any(200ms)) ended_early_ = *t;
    }
    return seen(type);
  }

  pid_t pid(size_t pod) const { return sup_.pid(pod); }
  void signal(size_t pod, int signo) { sup_.signal(pod, signo); }
  std::vector<process::WorkerEvent> events(std::string_view type) const {
    std::vector<process::WorkerEvent> out;
    for (const auto& e : events_)
      if (process::event_name(e) == type) out.push_back(e);
    return out;
  }
  std::string log() const { return log_.str(); }

 private:
  bool seen(std::string_view type) const { return !events(type).empty(); }
  void on_line(size_t pod, std::string_view line) {
    log_ << "[pod " << pod << "] " << line << "\n";
    if (auto e = process::parse_event(line)) events_.push_back(*e);
  }

  int world_;
  std::string job_file_;
  int port_ = 0;
  std::vector<process::WorkerEvent> events_;
  std::ostringstream log_;
  std::optional<process::Termination> ended_early_;
  process::Supervisor sup_{[this](size_t i, process::Stream, std::string_view line) { on_line(i, line); }};
};

// The local ranks the pod's torus-worker started (its children), by pid.
std::vector<pid_t> children_of(pid_t pod) {
  std::ifstream in("/proc/" + std::to_string(pod) + "/task/" + std::to_string(pod) + "/children");
  std::vector<pid_t> out;
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

class LocalRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kWorker)) GTEST_SKIP() << "torus-worker not built at " << kWorker;
  }
  test::TempDir dir_{"torus-local-ranks"};
};

TEST_F(LocalRanks, TwoPodsOfTwoProcessesFormAWorldOfFourAndTrain) {
  Pods pods(dir_.path(), 1, 4);
  pods.start(0);
  pods.start(1);
  const auto codes = pods.wait_all();
  EXPECT_EQ(codes, (std::map<size_t, int>{{0, 0}, {1, 0}})) << pods.log();
  std::set<int> started, finished;
  for (const auto& e : pods.events("started")) {
    started.insert(process::event_rank(e));
    EXPECT_EQ(std::get<process::StartedEvent>(e).world_size, 4) << process::format_event(e);
  }
  for (const auto& e : pods.events("finished")) finished.insert(process::event_rank(e));
  EXPECT_EQ(started, (std::set<int>{0, 1, 2, 3})) << pods.log();
  EXPECT_EQ(finished, (std::set<int>{0, 1, 2, 3})) << pods.log();
}

TEST_F(LocalRanks, AFailedLocalRankEndsItsPodWithThatRanksCode) {
  Pods pods(dir_.path(), 200, 2);  // one pod of two local ranks is the whole world
  pods.start(0);
  ASSERT_TRUE(pods.wait_for_event("checkpoint")) << pods.log();
  const std::vector<pid_t> ranks = children_of(pods.pid(0));
  ASSERT_EQ(ranks.size(), 2u) << pods.log();
  ::kill(ranks[1], SIGKILL);
  const auto codes = pods.wait_all();
  EXPECT_EQ(codes, (std::map<size_t, int>{{0, 128 + SIGKILL}})) << pods.log();
  EXPECT_TRUE(children_of(pods.pid(0)).empty());
}

TEST_F(LocalRanks, SigtermMakesEveryLocalRankCheckpointAndStop) {
  Pods pods(dir_.path(), 200, 2);
  pods.start(0);
  ASSERT_TRUE(pods.wait_for_event("progress")) << pods.log();
  pods.signal(0, SIGTERM);
  const auto codes = pods.wait_all();
  // Stopped on request is retryable: the next attempt resumes from the checkpoint each rank just wrote.
  EXPECT_EQ(codes, (std::map<size_t, int>{{0, to_int(launch::ExitCode::kRetryable)}})) << pods.log();
  EXPECT_NE(pods.log().find("stopped on request"), std::string::npos) << pods.log();
  EXPECT_FALSE(pods.events("checkpoint").empty()) << pods.log();
}

// A stop the pod was asked for waits for the local ranks' checkpoint however long it takes (the kubelet's grace,
// sized from the measured save, bounds it), not the pod's own stop_grace: here "local ranks" whose save takes
// longer than that grace still finish it.
TEST(LocalRanksStop, AStopAskedOfThePodIsNotCutByItsOwnGrace) {
  test::TempDir dir("torus-local-ranks-stop");
  const fs::path rank = dir.path() / "slow-save.sh";
  std::ofstream(rank) << "#!/bin/sh\ntrap 'sleep 0.5; echo saved > \"" << dir.path().string()
                      << "/saved-$LOCAL_RANK\"; exit 0' TERM\necho up > \"" << dir.path().string()
                      << "/up-$LOCAL_RANK\"\nwhile :; do sleep 0.05; done\n";
  fs::permissions(rank, fs::perms::owner_all);
  launch::RankEnv pod;
  pod.launch = launch::Launch::kLocalRanks;
  pod.job_name = "stop";
  pod.world_size = 2;
  pod.local_world_size = 2;
  pod.master_addr = "127.0.0.1";
  pod.master_port = 1;
  pod.secret = "s";
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  LocalRanksOptions options{rank.string(), 100ms, pipe_fds[0]};
  std::thread asker([&] {
    // Once both ranks run (their trap is set), the pod is asked to stop, as the kubelet's SIGTERM does.
    test::eventually([&] { return fs::exists(dir.path() / "up-0") && fs::exists(dir.path() / "up-1"); }, 60s, 10ms);
    (void)!::write(pipe_fds[1], "x", 1);
  });
  const int code = run_local_ranks(pod, options);
  asker.join();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_EQ(code, 0) << "killed by the pod's own 100 ms grace";
  EXPECT_TRUE(fs::exists(dir.path() / "saved-0"));
  EXPECT_TRUE(fs::exists(dir.path() / "saved-1"));
}

TEST(PodExitCode, TheFirstFailureIsThePods) {
  process::Termination ok, killed, retry;
  killed.signal = SIGKILL;
  retry.exit_code = 42;
  EXPECT_EQ(pod_exit_code({ok, ok}), 0);
  EXPECT_EQ(pod_exit_code({ok, killed, retry}), 137);
  EXPECT_EQ(pod_exit_code({retry, killed}), 42);
}

}  // namespace
}  // namespace torus::worker::app

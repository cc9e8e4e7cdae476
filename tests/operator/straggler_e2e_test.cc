// A straggler named by the operator while the job trains (issue 31.3): `kubectl apply` of a 2-rank TrainingJob on the
// API stand-in whose kubelet runs pods as local processes; rank 1's worker process is throttled from outside (stopped
// 10 ms of every 20, as torus run's AThrottledRankIsNamedAsTheStraggler does), so its own work per step takes about
// twice rank 0's. The operator reads both ranks' /metrics and sets the job's Straggler condition and event naming
// rank 1, its pod and its node while the job is Running; once the throttle stops the condition turns False while the
// job still trains; then the user deletes it.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

// A CPU job of 2 ranks on synthetic data, epochs of `steps` steps of a few ms, far more of them than the test waits
// for (one epoch of 2000 steps took 7.5 s here, and the test needs a few of the operator's 1 s reads before and
// after the throttle): it is named and recovers while it trains on any machine, and the test ends it.
// restartPolicy Never: it needs no checkpoint storage.
std::string job_yaml(const std::string& name, int steps) {
  return pod_job_yaml(name,
                      {.train_images = steps * 64, .batch = 64, .epochs = 10000, .run_policy = "restartPolicy: Never"});
}

// Stops `pid` for 10 ms of every 20 until destroyed (then lets it run).
class Throttle {
 public:
  explicit Throttle(pid_t pid)
      : pid_(pid), thread_([this] {
          while (!stop_) {
            ::kill(pid_, SIGSTOP);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the throttle itself is a duty cycle
            ::kill(pid_, SIGCONT);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~Throttle() {
    stop_ = true;
    thread_.join();
    ::kill(pid_, SIGCONT);
  }
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;

 private:
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class StragglerE2E : public PodTrainingE2E {
 protected:
  // The test starts the operator once the job is applied (start_operator): every rank's arrival figures are read
  // each second, so windows close while the short job trains; reading every rank's pod and writing the event are
  // granted by the chart's RBAC.
  StragglerE2E() : PodTrainingE2E("torus-straggler-e2e", {"--nodes", "2"}, OperatorStart::kByTest) {}
  std::optional<json> pod(const std::string& name) { return client_->try_get(res::kPods, kNs, name); }
  static json straggler_condition(const json& status) {
    for (const json& c : status.value("conditions", json::array()))
      if (c.value("type", "") == "Straggler") return c;
    return json::object();
  }
  std::vector<std::string> events_of(const std::string& job, const std::string& reason) {
    const json list = client_->list(res::kEvents, kNs, {"", "involvedObject.name=" + job + ",reason=" + reason, ""});
    std::vector<std::string> out;
    for (const json& e : list.value("items", json::array())) out.push_back(e.value("message", ""));
    return out;
  }
  // The pid of a pod's worker container, once the process kubelet started it (<root>/<ns>/<name>-<uid>/worker.pid).
  std::optional<pid_t> worker_pid(const json& p) {
    std::ifstream in(pod_dir(p) / "worker.pid");
    pid_t pid = 0;
    if (!(in >> pid) || pid <= 0) return std::nullopt;
    return pid;
  }
  std::string logs() const { return read_file(dir_ / "operator.log"); }
};

TEST_F(StragglerE2E, AThrottledRankIsNamedWithItsPodAndNodeWhileTheJobTrains) {
  start_operator();
  const std::string file = (dir_ / "slow.yaml").string();
  std::ofstream(file) << job_yaml("slow", 2000);
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);
  std::optional<pid_t> pid;
  ASSERT_TRUE(eventually(
      [&] {
        const auto p = pod("slow-worker-1");
        if (p) pid = worker_pid(*p);
        return pid.has_value();
      },
      60s))
      << status_of("slow").dump();
  const std::string node = pod("slow-worker-1")->value("spec", json::object()).value("nodeName", "");
  ASSERT_FALSE(node.empty());
  const std::string named = "rank 1 (pod slow-worker-1, node " + node + ")";
  json status;
  {
    Throttle throttle(*pid);
    ASSERT_TRUE(eventually(
        [&] {
          status = status_of("slow");
          return straggler_condition(status).value("status", "") == "True";
        },
        120s))
        << status.dump() << "\n"
        << logs();
    // Named while the job trains, from the same read: not a post-mortem.
    EXPECT_EQ(status.value("phase", ""), "Running") << status.dump();
    const json c = straggler_condition(status);
    EXPECT_EQ(c.value("reason", ""), "RankArrivesLate");
    EXPECT_EQ(c.value("message", "").rfind(named + " arrives at the all-reduce after ", 0), 0u) << c.dump();
    std::vector<std::string> warnings;
    ASSERT_TRUE(eventually([&] { return !(warnings = events_of("slow", "Straggler")).empty(); }, 30s));
    EXPECT_EQ(warnings[0].rfind(named + " arrives at the all-reduce after ", 0), 0u) << warnings[0];
  }
  // The throttle is off: a later window has no straggler, and the condition says so while the job still trains.
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("slow");
        return straggler_condition(status).value("status", "") == "False";
      },
      120s))
      << status.dump();
  EXPECT_EQ(status.value("phase", ""), "Running") << status.dump();
  EXPECT_EQ(straggler_condition(status).value("reason", ""), "Recovered");
  EXPECT_TRUE(eventually([&] { return !events_of("slow", "StragglerRecovered").empty(); }, 30s));
  // The user ends the job; its pods go with it.
  const CmdResult deleted = kubectl({"delete", "trainingjob", "slow", "--wait=true", "--timeout=60s"}, 70s);
  ASSERT_EQ(deleted.code, 0) << deleted.out;
  EXPECT_TRUE(eventually([&] { return !pod("slow-worker-0") && !pod("slow-worker-1"); }, 60s));
}

}  // namespace
}  // namespace torus::controller::e2e

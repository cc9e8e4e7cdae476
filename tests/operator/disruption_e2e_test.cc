// A disruption is not a failure, end to end: `kubectl apply` of a 2-rank TrainingJob with backoffLimit 0 on the API
// stand-in whose kubelet runs pods as local processes, then the real `kubectl drain` of worker 1's node. Drain
// cordons the node and evicts the pod through the eviction API, which marks it with the DisruptionTarget condition
// before deleting it (SIGTERM, the ranks agree to stop and rank 0 checkpoints). The operator restarts the gang as a
// new attempt off the cordoned node, counts the restart in status.disruptions, not status.restarts (a failure would
// have failed this job: its backoffLimit is 0), and says why in a Normal event naming the pod, its node and the
// condition's reason; the job then trains to its end and Succeeds.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <future>
#include <regex>

#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

// A CPU job of 2 ranks on synthetic data (8 steps an epoch), checkpoints every 4 steps on a claim (the operator
// mounts it on worker 0), restartPolicy ExitCode and backoffLimit 0: any failure fails it. Rank 1 of attempt 0 stops
// itself (SIGSTOP) after step 9, so the gang is surely mid-training when the test drains its node; attempt 1 trains
// the remaining steps and the job ends by itself.
std::string job_yaml(const std::string& name) {
  return pod_job_yaml(name, {.epochs = 4,
                             .env = {"- {name: TORUS_TEST_SIGSTOP_AT_STEP, value: \"1:9\"}"},
                             .checkpoint_every_steps = 4,
                             .run_policy = "restartPolicy: ExitCode\nbackoffLimit: 0"});
}

class DisruptionE2E : public PodTrainingE2E {
 protected:
  DisruptionE2E() : PodTrainingE2E("torus-disruption-e2e", {"--nodes", "2"}, OperatorStart::kAtSetUp) {}
  std::optional<json> pod_named(const std::string& job, const std::string& name) const {
    for (const json& pod : pods_of(job)) {
      if (pod["metadata"].value("name", "") == name) return pod;
    }
    return std::nullopt;
  }
  // The job's events with `reason`.
  std::vector<json> events_of(const std::string& job, const std::string& reason) const {
    const json list = client_->list(res::kEvents, kNs, {"", "involvedObject.name=" + job + ",reason=" + reason, ""});
    return list.value("items", json::array()).get<std::vector<json>>();
  }
  pid_t worker_pid(const json& pod) const { return std::stoi(read_file(pod_dir(pod) / "worker.pid")); }
  // The state letter of /proc/PID/stat ('T': stopped by a signal), or 0 when the process is gone.
  static char state_of(pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
  }
  // Every log the job's pods wrote, pods of every attempt (by folder name), and the operator's.
  std::string logs_of(const std::string& job) const {
    std::string all;
    if (fs::exists(dir_ / "pods" / kNs)) {
      for (const auto& entry : fs::directory_iterator(dir_ / "pods" / kNs)) {
        if (entry.path().filename().string().rfind(job + "-worker-", 0) != 0) continue;
        all += "== " + entry.path().filename().string() + "\n" + read_file(entry.path() / "worker.log");
      }
    }
    return all + "== operator\n" + read_file(dir_ / "operator.log");
  }
};

// The pod's condition of `type` (a pointer into `pod`), or null.
const json* condition_of(const json& pod, const std::string& type) {
  const auto status = pod.find("status");
  if (status == pod.end() || !status->contains("conditions")) return nullptr;
  for (const json& c : (*status)["conditions"]) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

TEST_F(DisruptionE2E, ADrainedWorkersGangRestartsAsADisruptionAndTheJobWithNoBackoffLeftSucceeds) {
  const std::string file = (dir_ / "drain.yaml").string();
  std::ofstream(file) << job_yaml("drain");
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);

  // Rank 1 holds itself after step 9: the gang is Running, mid-training, until the test continues it.
  pid_t held = 0;
  json worker1;
  ASSERT_TRUE(eventually(
      [&] {
        const auto pod = pod_named("drain", "drain-worker-1");
        if (!pod || !fs::exists(pod_dir(*pod) / "worker.pid")) return false;
        worker1 = *pod;
        held = worker_pid(*pod);
        return state_of(held) == 'T';
      },
      120s))
      << status_of("drain").dump() << "\n"
      << logs_of("drain");
  struct ContinueOnExit {  // on every path out: a failed check must not leave a stopped process behind
    pid_t pid;
    ~ContinueOnExit() {
      if (pid > 0) ::kill(pid, SIGCONT);
    }
  } continue_on_exit{held};
  ASSERT_TRUE(eventually([&] { return status_of("drain").value("phase", "") == "Running"; }, 60s))
      << status_of("drain").dump();
  const std::string node = worker1["spec"].value("nodeName", "");
  const auto worker0 = pod_named("drain", "drain-worker-0");
  ASSERT_TRUE(worker0);
  ASSERT_FALSE(node.empty());
  ASSERT_NE((*worker0)["spec"].value("nodeName", ""), node) << "the two workers share a node";

  // The real kubectl drain: cordon, then evict through policy/v1; it waits until the pod is gone, which takes rank
  // 1's continuation, so it runs beside the test.
  auto drained = std::async(std::launch::async, [&] {
    return kubectl({"drain", node, "--pod-selector=" + std::string(kLabelJobName) + "=drain", "--ignore-daemonsets",
                    "--delete-emptydir-data", "--force", "--timeout=120s"},
                   150s);
  });
  // The eviction marked the pod before deleting it; then rank 1 may handle its SIGTERM.
  json evicted;
  ASSERT_TRUE(eventually(
      [&] {
        const auto pod = pod_named("drain", "drain-worker-1");
        if (!pod) return false;
        evicted = *pod;
        return condition_of(evicted, "DisruptionTarget") && evicted["metadata"].contains("deletionTimestamp");
      },
      60s))
      << (evicted.is_null() ? "worker 1 gone" : evicted.dump());
  EXPECT_EQ((*condition_of(evicted, "DisruptionTarget"))["reason"], "EvictionByEvictionAPI");
  ASSERT_EQ(::kill(held, SIGCONT), 0);
  continue_on_exit.pid = 0;

  const CmdResult drain = drained.get();
  ASSERT_EQ(drain.code, 0) << drain.out;
  EXPECT_NE(drain.out.find("node/" + node + " cordoned"), std::string::npos) << drain.out;
  EXPECT_NE(drain.out.find("evicting pod default/drain-worker-1"), std::string::npos) << drain.out;
  EXPECT_NE(drain.out.find("pod/drain-worker-1 evicted"), std::string::npos) << drain.out;

  // The job had no backoff left: it can only succeed if the restart was charged to the disruption (a failure
  // fails it at once: BackoffLimitExceeded).
  json status;
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("drain");
        const std::string phase = status.value("phase", "");
        return phase == "Succeeded" || phase == "Failed";
      },
      240s))
      << status.dump() << "\n"
      << logs_of("drain");
  ASSERT_EQ(status.value("phase", ""), "Succeeded") << status.dump() << "\n" << logs_of("drain");
  EXPECT_EQ(status.value("attempt", -1), 1) << status.dump();
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  EXPECT_EQ(status.value("disruptions", -1), 1) << status.dump();

  // The Normal event names the pod, its node and the condition's reason and message.
  const std::vector<json> events = events_of("drain", "Disrupted");
  ASSERT_EQ(events.size(), 1u) << json(events).dump();
  EXPECT_EQ(events[0].value("type", ""), "Normal");
  EXPECT_NE(
      events[0]
          .value("message", "")
          .find("drain-worker-1 on node " + node + " was disrupted: EvictionByEvictionAPI (Eviction API: evicting)"),
      std::string::npos)
      << events[0].dump();
  EXPECT_TRUE(events_of("drain", "GangRestart").empty()) << "a failure's event";

  // Both ranks stopped at one step, rank 0 saved it, and attempt 1, off the cordoned node, resumed there.
  const std::string logs = logs_of("drain");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(logs, m, std::regex("stopped on request at step ([0-9]+)"))) << logs;
  EXPECT_NE(
      logs.find("checkpoint written: /var/lib/torus/checkpoints/" + uid_of("drain") + "/ckpt-" + m[1].str() + ".torus"),
      std::string::npos)
      << logs;
  EXPECT_NE(logs.find("resuming at step " + m[1].str()), std::string::npos) << logs;
  for (const json& pod : pods_of("drain")) {
    EXPECT_EQ(pod["metadata"]["labels"].value(std::string(kLabelAttempt), ""), "1") << pod["metadata"].dump();
    EXPECT_NE(pod["spec"].value("nodeName", ""), node) << "placed on the cordoned node";
    EXPECT_EQ(pod["status"].value("phase", ""), "Succeeded");
  }
}

}  // namespace
}  // namespace torus::controller::e2e

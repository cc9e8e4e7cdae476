// Preemption costs little (issue 31.4), end to end: `kubectl apply` of a 2-rank TrainingJob on the API stand-in whose
// kubelet runs pods as local processes (SIGTERM on deletion, SIGKILL after the pod's grace), then `kubectl delete pod`
// of one worker mid-training, as an eviction or a preemption does. Every rank stops at the step it reached and rank
// 0 saves that step before the grace ends; the gang restarts and resumes from that step, not from the last periodic
// checkpoint; the job's ledger shows no lost work; the first attempt's pods carry Kubernetes' 30 s (nothing measured
// then) and the next attempt's the grace derived from the measured step and save (termination_grace.h).
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/api/codec.h"
#include "operator/controller/termination_grace.h"
#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

// A CPU job of 2 ranks on synthetic data, many short steps, a checkpoint every 40 steps on a claim (the operator
// mounts it on worker 0), restartPolicy ExitCode: the stopped ranks' retryable exit restarts the gang. Far more epochs
// than the test waits for (200 of them trained in ~5 s here): the eviction must reach attempt 0 while it trains, and
// the operator must read attempt 1's /metrics while it trains, on any machine; the test ends the job.
std::string job_yaml(const std::string& name) {
  return pod_job_yaml(name, {.epochs = 10000, .checkpoint_every_steps = 40});
}

class PreemptionE2E : public PodTrainingE2E {
 protected:
  PreemptionE2E() : PodTrainingE2E("torus-preemption-e2e", {"--nodes", "2"}, OperatorStart::kAtSetUp) {}
  std::string log_of(const json& pod) { return read_file(pod_dir(pod) / "worker.log"); }
  std::string all_logs(const std::vector<json>& pods) {
    std::string all;
    for (const json& p : pods) all += "== " + pod_dir(p).filename().string() + "\n" + log_of(p);
    return all + "== operator\n" + read_file(dir_ / "operator.log");
  }
};

int64_t grace_of(const json& pod) { return pod["spec"].value("terminationGracePeriodSeconds", int64_t{-1}); }
std::string grace_source(const json& pod) {
  return pod["metadata"]["annotations"].value(std::string(kAnnotationTerminationGrace), "");
}
const json& by_name(const std::vector<json>& pods, const std::string& name) {
  for (const json& p : pods)
    if (p["metadata"].value("name", "") == name) return p;
  throw std::runtime_error("no pod " + name);
}

// The inputs the pod's annotation says its grace was derived from (step, save, evaluation seconds).
std::optional<std::array<double, 3>> grace_inputs(const json& pod) {
  static const std::regex kInputs("step (\\S+) s, save (\\S+) s, evaluation (\\S+) s");
  std::smatch m;
  const std::string source = grace_source(pod);
  if (!std::regex_match(source, m, kInputs)) return std::nullopt;
  return std::array<double, 3>{std::stod(m[1]), std::stod(m[2]), std::stod(m[3])};
}

// The grace the pod's annotated inputs derive, as the operator derived it when it made the pod.
std::optional<int64_t> rederived(const json& pod) {
  const auto in = grace_inputs(pod);
  if (!in) return std::nullopt;
  return derive_termination_grace({(*in)[0], (*in)[1], (*in)[2]});
}

TEST_F(PreemptionE2E, ADeletedWorkerCheckpointsItsStepAndTheGangResumesThereWithTheDerivedGrace) {
  const std::string file = (dir_ / "pre.yaml").string();
  std::ofstream(file) << job_yaml("pre");
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);
  // A periodic save measured (the grace's input), and steps trained past it that a SIGKILL would lose.
  json status;
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("pre");
        const json g = status.value("goodput", json::object());
        const int64_t saved = status.value("lastCheckpoint", json::object()).value("step", int64_t{0});
        const int64_t step = status.value("progress", json::object()).value("step", int64_t{0});
        return g.value("slowestCheckpointSeconds", 0.0) > 0 && g.value("stepSeconds", 0.0) > 0 && saved > 0 &&
               step >= saved + 3;
      },
      180s))
      << status.dump() << "\n"
      << all_logs(pods_of("pre"));
  const int64_t reached = status["progress"].value("step", int64_t{0});
  const double measured_save = status["goodput"].value("slowestCheckpointSeconds", 0.0);
  const std::vector<json> first = pods_of("pre");
  ASSERT_EQ(first.size(), 2u);
  for (const json& p : first) {  // made before anything was measured
    EXPECT_EQ(grace_of(p), kUnmeasuredGraceSeconds) << p["metadata"].dump();
    EXPECT_EQ(grace_source(p), "unmeasured");
  }
  // An eviction's deletion: SIGTERM now, SIGKILL after the pod's grace.
  ASSERT_EQ(kubectl({"delete", "pod", "pre-worker-1", "--wait=false"}).code, 0);
  std::vector<json> second;
  ASSERT_TRUE(eventually([&] { return all_running(second = pods_of("pre"), 2, 1); }, 120s))
      << status_of("pre").dump() << "\n"
      << all_logs(first);

  // Both ranks agreed on one step, rank 0 saved it, and each exited on its own before the grace ended.
  std::smatch m;
  const std::string rank0 = log_of(by_name(first, "pre-worker-0"));
  const std::string rank1 = log_of(by_name(first, "pre-worker-1"));
  ASSERT_TRUE(std::regex_search(rank1, m, std::regex("stopped on request at step ([0-9]+)"))) << all_logs(first);
  const int64_t stopped = std::stoll(m[1]);
  EXPECT_NE(rank0.find("stopped on request at step " + m[1].str() + " "), std::string::npos) << rank0;
  EXPECT_NE(
      rank0.find("checkpoint written: /var/lib/torus/checkpoints/" + uid_of("pre") + "/ckpt-" + m[1].str() + ".torus"),
      std::string::npos)
      << rank0;
  EXPECT_GE(stopped, reached) << "the step it had reached, not an earlier one";

  // The next attempt resumed from that step, and the ledger counts nothing lost.
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("pre");
        return status.value("resumedFrom", json::object()).value("attempt", -1) == 1 &&
               status.value("goodput", json::object()).value("attempt", -1) == 1;
      },
      120s))
      << status.dump();
  EXPECT_EQ(status["resumedFrom"].value("step", int64_t{-1}), stopped) << status.dump();
  EXPECT_NE(log_of(by_name(second, "pre-worker-0")).find("resuming at step " + std::to_string(stopped)),
            std::string::npos)
      << all_logs(second);
  EXPECT_EQ(status["goodput"].value("lostSteps", int64_t{-1}), 0) << status.dump();
  EXPECT_DOUBLE_EQ(status["goodput"].value("lostWorkSeconds", -1.0), 0) << status.dump();

  // The new attempt's pods carry the grace derived from what attempt 0 measured.
  for (const json& p : second) {
    const auto derived = rederived(p);
    ASSERT_TRUE(derived) << grace_source(p);
    EXPECT_EQ(grace_of(p), *derived) << grace_source(p);
    EXPECT_GE(grace_of(p), kGraceFloorSeconds);
    // Its save input is status.goodput.slowestCheckpointSeconds (which only grows) as the operator held it then.
    EXPECT_GE((*grace_inputs(p))[1], measured_save) << grace_source(p) << " " << status_of("pre").dump();
    EXPECT_LE((*grace_inputs(p))[1], status_of("pre")["goodput"].value("slowestCheckpointSeconds", 0.0))
        << grace_source(p);
  }
  EXPECT_EQ(status_of("pre").value("phase", ""), "Running") << status_of("pre").dump();
  // The user ends the job; its pods go with it.
  const CmdResult deleted = kubectl({"delete", "trainingjob", "pre", "--wait=true", "--timeout=60s"}, 70s);
  ASSERT_EQ(deleted.code, 0) << deleted.out;
  EXPECT_TRUE(eventually([&] { return pods_of("pre").empty(); }, 60s)) << pods_of("pre").size() << " pods left";
}

}  // namespace
}  // namespace torus::controller::e2e

// Pods as a cluster admits and runs them (issue 38), end to end: the namespace enforces Pod Security `restricted`
// (its label, read by the stand-in's admission as kube-apiserver reads it), the workers run from the worker image as
// its user 65532 (the operator's restricted defaults), and their checkpoints live on a new claim, root-owned as a
// freshly formatted volume is, which only fsGroup makes theirs:
//   - the gang trains, a SIGKILLed worker's gang resumes from its checkpoint (step > 0), and the job Succeeds;
//   - without fsGroup the first checkpoint is refused (permission denied) and the job's condition quotes it;
//   - a pod the namespace's level refuses is named, with the admission's message, in the job's condition at once,
//     and the job waits (Pending) rather than failing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>

#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

constexpr int kNonRoot = 65532;

class PodSecurityE2E : public PodTrainingE2E {
 protected:
  PodSecurityE2E() : PodTrainingE2E("torus-pod-security-e2e", {"--nodes", "2"}, OperatorStart::kAtSetUp) {}
  void SetUp() override {
    PodTrainingE2E::SetUp();
    if (IsSkipped()) return;
    const CmdResult labelled = kubectl({"label", "namespace", kNs, "pod-security.kubernetes.io/enforce=restricted",
                                        "pod-security.kubernetes.io/enforce-version=latest"});
    ASSERT_EQ(labelled.code, 0) << labelled.out;
  }

  // `kubectl apply -f` (or, `verb` "create", `kubectl create -f`: it keeps a null, which apply reads as "remove").
  void apply(const std::string& name, const std::string& yaml, const std::string& verb = "apply") {
    const std::string file = (dir_ / (name + ".yaml")).string();
    std::ofstream(file) << yaml;
    const CmdResult r = kubectl({verb, "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }
  // `yaml` (pod_job_yaml's) with `lines` as the worker pod's template spec, inserted after the image line.
  static std::string with_template(std::string yaml, const std::string& lines) {
    const std::string image = worker_image_line();
    yaml.replace(yaml.find(image), image.size(), image + "    template:\n      spec:\n" + lines);
    return yaml;
  }
  std::string logs_of(const std::string& job) const {
    std::string all;
    for (const json& pod : pods_of(job)) all += read_file(pod_dir(pod) / "worker.log");
    return all;
  }
  std::optional<json> condition(const std::string& job, const std::string& type) const {
    for (const json& c : status_of(job).value("conditions", json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return std::nullopt;
  }
  // The uid and gid a running worker process has (from /proc), or -1.
  static std::pair<int, int> ids_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    int uid = -1, gid = -1;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Uid:", 0) == 0) uid = std::stoi(line.substr(4));
      if (line.rfind("Gid:", 0) == 0) gid = std::stoi(line.substr(4));
    }
    return {uid, gid};
  }
};

TEST_F(PodSecurityE2E, ARestrictedNamespaceRunsTheGangAsNonRootAndASigkilledWorkerResumesFromItsClaim) {
  // Enough epochs that the kill lands while attempt 0 trains (80 take ~4 s here), few enough to end by itself.
  apply("sec", pod_job_yaml("sec", {.epochs = 600, .checkpoint_every_steps = 4}));
  ASSERT_TRUE(eventually([&] { return status_of("sec").value("lastCheckpoint", json::object()).value("step", 0) > 0; },
                         120s))
      << status_of("sec").dump() << "\n"
      << logs_of("sec");
  json victim;
  for (const json& pod : pods_of("sec")) {
    if (pod["metadata"].value("name", "") == "sec-worker-1") victim = pod;
  }
  ASSERT_FALSE(victim.is_null());
  const pid_t pid = std::stoi(read_file(pod_dir(victim) / "worker.pid"));
  EXPECT_EQ(ids_of(pid), std::make_pair(kNonRoot, kNonRoot));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return status_of("sec").value("phase", "") == "Succeeded"; }, 180s))
      << status_of("sec").dump() << "\n"
      << logs_of("sec");
  const json status = status_of("sec");
  EXPECT_EQ(status.value("attempt", -1), 1) << status.dump();
  EXPECT_GT(status.value("resumedFrom", json::object()).value("step", 0), 0) << status.dump();
  // The claim's files are the workers': written as 65532 into a folder fsGroup made theirs.
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "pods" / "_claims" / kNs)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, static_cast<uid_t>(kNonRoot)) << entry.path();
  }
  EXPECT_GT(files, 0);
}

TEST_F(PodSecurityE2E, WithoutFsGroupTheNewClaimIsNotTheWorkersAndTheJobQuotesTheRefusal) {
  apply("nofs", with_template(pod_job_yaml("nofs", {.epochs = 2, .checkpoint_every_steps = 2,
                                                    .run_policy = "restartPolicy: ExitCode\nbackoffLimit: 0"}),
                              "        securityContext: {fsGroup: null}\n"),
        "create");
  ASSERT_TRUE(eventually([&] { return status_of("nofs").value("phase", "") == "Failed"; }, 120s))
      << status_of("nofs").dump() << "\n"
      << logs_of("nofs");
  const auto failed = condition("nofs", "Failed");
  ASSERT_TRUE(failed) << status_of("nofs").dump();
  EXPECT_THAT(failed->value("message", ""), ::testing::ContainsRegex("[Pp]ermission denied")) << failed->dump();
  for (const json& pod : pods_of("nofs")) EXPECT_FALSE(pod["spec"]["securityContext"].contains("fsGroup"));
}

TEST_F(PodSecurityE2E, APodTheNamespaceRefusesIsNamedWithTheAdmissionsMessageAndTheJobWaits) {
  apply("priv", with_template(pod_job_yaml("priv", {.epochs = 1, .checkpoint_every_steps = 2}),
                              "        containers:\n        - name: worker\n"
                              "          securityContext: {allowPrivilegeEscalation: true}\n"));
  std::optional<json> waiting;
  ASSERT_TRUE(eventually(
      [&] {
        waiting = condition("priv", "PodsWaiting");
        return waiting && waiting->value("status", "") == "True";
      },
      20s))
      << status_of("priv").dump();
  EXPECT_EQ(waiting->value("reason", ""), "FailedCreate");
  EXPECT_THAT(waiting->value("message", ""),
              ::testing::HasSubstr("Pod priv-worker-0: pods \"priv-worker-0\" is forbidden: violates PodSecurity "
                                   "\"restricted:latest\": allowPrivilegeEscalation != false"));
  EXPECT_EQ(status_of("priv").value("phase", ""), "Pending");
  EXPECT_TRUE(pods_of("priv").empty());
}

}  // namespace
}  // namespace torus::controller::e2e

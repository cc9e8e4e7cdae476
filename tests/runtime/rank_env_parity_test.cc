// The launch contract's parity: for the same job and rank, a worker pod's environment (the operator's pod builder,
// with the downward API filled in and, in a pod of several processes, the in-pod supervisor's local rank) and
// `torus run`'s process environment read back as the same rank of the same gang.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/api/defaults.h"
#include "common/api/validation.h"
#include "common/launch/checkpoint_layout.h"
#include "common/launch/rank_env.h"
#include "operator/controller/children.h"
#include "operator/runtime/local_run.h"
#include "tests/support/temp_dir.h"

namespace torus::runtime {
namespace {

using json = nlohmann::json;
constexpr int kAttempt = 1;
const std::string kSecret = "parity-secret";

api::TrainingJob job_of(int workers, int processes_per_worker) {
  const std::string yaml =
      "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: parity\n"
      "  namespace: team\nspec:\n  gang:\n    workers: " +
      std::to_string(workers) + "\n    processesPerWorker: " + std::to_string(processes_per_worker) +
      "\n    device: cpu\n  model:\n    arch: resnet9\n  data:\n    dataset: synthetic\n"
      "  training:\n    epochs: 1\n    batchSize: 96\n    lrSchedule:\n      type: one-cycle\n      peak: 0.1\n";
  return api::with_defaults(api::load_job_yaml(yaml, "parity.yaml"));
}

// What a kubelet gives the container: literal values, downward API fields of the pod, and the mounted secret
// (here a file in `dir` holding the run's secret).
std::map<std::string, std::string> container_env(const json& pod, const std::string& secret_file) {
  const std::map<std::string, std::string> fields = {{"spec.nodeName", "node-1"}, {"status.podIP", "127.0.1.2"}};
  std::map<std::string, std::string> vars;
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    const std::string name = e["name"];
    vars[name] = e.contains("valueFrom") ? fields.at(e["valueFrom"]["fieldRef"]["fieldPath"].get<std::string>())
                                         : e["value"].get<std::string>();
  }
  vars["TORUS_RENDEZVOUS_SECRET_FILE"] = secret_file;
  return vars;
}

// Rank `rank` as its pod runs it: the pod's environment, then (several processes per pod) its local rank's.
launch::RankEnv pod_side(const api::TrainingJob& job, int rank, const std::string& secret_file) {
  const int ppw = job.spec.gang.processes_per_worker.value_or(1);
  const json pod = controller::build_worker_pod(job, rank / ppw, kAttempt);
  const launch::RankEnv read = launch::rank_env_from(container_env(pod, secret_file));
  if (ppw == 1) return read;
  EXPECT_EQ(read.launch, launch::Launch::kLocalRanks);
  return launch::rank_env_from(launch::to_process_env(launch::local_rank_env(read, rank % ppw)));
}

launch::RankEnv run_side(const api::TrainingJob& job, int rank, const std::string& job_file) {
  const LocalGang gang{job_file, "this-host", 40123, kSecret};
  return launch::rank_env_from(launch::to_process_env(torus_run_rank_env(job, rank, kAttempt, gang)));
}

// Who the rank is in which gang: what both launchers must agree on.
auto identity(const launch::RankEnv& e) {
  return std::make_tuple(e.launch, e.job_name, e.ns, e.attempt, e.world_size, e.rank, e.secret, e.store_prefix());
}
// Where the rank sits among the gang's hosts.
auto placement(const launch::RankEnv& e) { return std::make_tuple(e.node_rank, e.local_rank, e.local_world_size); }

class RankEnvParity : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(secret_file_) << kSecret << "\n"; }
  test::TempDir dir_{"torus-parity"};
  const std::string secret_file_ = (dir_.path() / "secret").string();
};

TEST_F(RankEnvParity, EveryRankOfAMultiProcessGangIsTheSameRankUnderBothLaunchers) {
  const api::TrainingJob job = job_of(2, 2);
  for (int rank = 0; rank < 4; ++rank) {
    const launch::RankEnv pod = pod_side(job, rank, secret_file_);
    const launch::RankEnv local = run_side(job, rank, "/tmp/run/job.yaml");
    EXPECT_EQ(identity(pod), identity(local)) << "rank " << rank;
    EXPECT_FALSE(pod.job_file.empty());
    EXPECT_FALSE(local.job_file.empty());
    // Pods are hosts of processesPerWorker ranks; `torus run` is one host of all of them.
    EXPECT_EQ(placement(pod), std::make_tuple(rank / 2, rank % 2, 2)) << "rank " << rank;
    EXPECT_EQ(placement(local), std::make_tuple(0, rank, 4)) << "rank " << rank;
    // Each binds its own address: the pod its IP (downward API), the local rank loopback.
    EXPECT_EQ(pod.bind_address, "127.0.1.2");
    EXPECT_EQ(local.bind_address, "127.0.0.1");
    EXPECT_EQ(pod.node_name, "node-1");
    EXPECT_EQ(pod.metrics_port, api::kDefaultMetricsPort + rank % 2);
  }
}

TEST_F(RankEnvParity, OnePodOfSeveralProcessesReadsBackExactlyAsTorusRun) {
  const api::TrainingJob job = job_of(1, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const launch::RankEnv pod = pod_side(job, rank, secret_file_);
    const launch::RankEnv local = run_side(job, rank, "/tmp/run/job.yaml");
    EXPECT_EQ(identity(pod), identity(local)) << "rank " << rank;
    EXPECT_EQ(placement(pod), placement(local)) << "rank " << rank;
  }
}

// The run (whose checkpoints are the attempt's own): a job's uid for every pod of every attempt; one id for every rank
// of one `torus run`.
TEST_F(RankEnvParity, EveryRankOfAGangIsOfOneRun) {
  api::TrainingJob job = job_of(2, 2);
  job.metadata.uid = "0d4b1c2e-8f3a-4e5b-9c6d-7e8f9a0b1c2d";
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(pod_side(job, rank, secret_file_).run_id, job.metadata.uid) << "rank " << rank;
    const LocalGang gang{"/tmp/run/job.yaml", "this-host", 40123, kSecret, "20260314-101502-3fa2"};
    EXPECT_EQ(launch::rank_env_from(launch::to_process_env(torus_run_rank_env(job, rank, kAttempt, gang))).run_id,
              "20260314-101502-3fa2");
  }
  EXPECT_EQ(launch::run_id_problem(new_local_run_id()), "");
  EXPECT_NE(new_local_run_id(), new_local_run_id()) << "each torus run is a new run";
}

TEST_F(RankEnvParity, SingleProcessPodsAreOneRankEach) {
  const api::TrainingJob job = job_of(3, 1);
  for (int rank = 0; rank < 3; ++rank) {
    const launch::RankEnv pod = pod_side(job, rank, secret_file_);
    EXPECT_EQ(pod.launch, launch::Launch::kRank);
    EXPECT_EQ(identity(pod), identity(run_side(job, rank, "/tmp/run/job.yaml"))) << "rank " << rank;
    EXPECT_EQ(placement(pod), std::make_tuple(rank, 0, 1));
  }
}

// examples/imagenet-resnet50.yaml (16 pods x 8 GPUs): every pod starts its eight local ranks, and together they are
// the world of 128, each rank once, each on its own GPU (LOCAL_RANK) of its pod. The GPU ranks themselves need a
// device; tests/worker/local_ranks_test.cc starts real local ranks on CPU.
TEST_F(RankEnvParity, TheMultiGpuExampleStartsEveryRankOnceOnItsOwnGpu) {
  const api::TrainingJob job = api::load_job_file(std::string(TORUS_SOURCE_DIR) + "/examples/imagenet-resnet50.yaml");
  std::set<int> ranks;
  for (int pod = 0; pod < 16; ++pod) {
    const launch::RankEnv env =
        launch::rank_env_from(container_env(controller::build_worker_pod(job, pod, kAttempt), secret_file_));
    ASSERT_EQ(env.launch, launch::Launch::kLocalRanks) << "pod " << pod;
    ASSERT_EQ(env.local_world_size, 8);
    for (int local = 0; local < 8; ++local) {
      const launch::RankEnv rank = launch::local_rank_env(env, local);
      EXPECT_EQ(rank.world_size, 128);
      EXPECT_EQ(rank.local_rank, local);
      ranks.insert(rank.rank);
    }
  }
  EXPECT_EQ(ranks.size(), 128u);
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), 127);
}

}  // namespace
}  // namespace torus::runtime

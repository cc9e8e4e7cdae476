// TrainingJob -> RunOptions: every communicator and engine knob comes from the spec; an environment override replaces
// a job value only when declared, and is recorded for the rank's log.
#include "worker/app/run_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "common/api/validation.h"
#include "common/util/error.h"
#include "tests/api/corpus.h"
#include "worker/optim/schedule.h"

namespace torus::worker::app {
namespace {

launch::RankEnv ranks(int world_size) {
  launch::RankEnv e;
  e.world_size = world_size;
  return e;
}

api::TrainingJob example(const char* name) {
  return api::load_job_file((api::testing::source_dir() / "examples" / name).string());
}

TEST(RunOptions, CommunicatorAndEngineComeFromTheSpec) {
  api::TrainingJob job = example("fashion-mnist.yaml");
  job.spec.all_reduce.algorithm = api::AllReduceAlgorithm::kTorus2d;
  job.spec.all_reduce.grid = {2, 1};
  job.spec.all_reduce.timeout_seconds = 2;
  job.spec.all_reduce.compression = api::Compression::kFp16;
  job.spec.all_reduce.first_bucket_size_mb = 0.5;
  job.spec.all_reduce.bucket_size_mb = 4;
  job.spec.training.seed = 7;
  job.spec.gang.threads_per_process = 3;
  const RunOptions r = run_options(job.spec, ranks(2), tunables::Snapshot{});
  EXPECT_EQ(r.comm.algorithm, api::AllReduceAlgorithm::kTorus2d);
  EXPECT_EQ(r.comm.grid_x, 2);
  EXPECT_EQ(r.comm.timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(r.comm.compression, api::Compression::kFp16);
  EXPECT_EQ(r.comm.first_bucket_bytes, size_t{512} << 10);
  EXPECT_EQ(r.comm.bucket_cap_bytes, size_t{4} << 20);
  EXPECT_EQ(r.engine.seed, 7u);
  EXPECT_EQ(r.train.model.seed, 7u) << "the seed initializes the weights too";
  EXPECT_EQ(r.engine.threads, 3);
  EXPECT_EQ(r.engine.precision, api::Precision::kFp32);
  EXPECT_TRUE(r.overrides.empty());
}

// The trainer's own config carries the job's precision (WorkerMain.TheJobsPrecisionIsWhatTheTrainerBuildsAndExports
// runs it); the launch contract gives the rank, the local GPU and the metrics port.
TEST(RunOptions, PrecisionRankAndTelemetryComeFromTheJobAndTheLaunchContract) {
  api::TrainingJob job = example("fashion-mnist.yaml");
  job.spec.gang.device = api::Device::kGpu;
  job.spec.gang.processes_per_worker = 2;
  for (const api::Precision precision : {api::Precision::kFp32, api::Precision::kBf16, api::Precision::kFp16}) {
    job.spec.training.precision = precision;
    launch::RankEnv e = ranks(4);
    e.rank = 3;
    e.local_rank = 1;
    e.metrics_port = 9400;
    e.job_name = "j";
    const RunOptions r = run_options(job.spec, e, tunables::Snapshot{});
    EXPECT_EQ(r.engine.precision, precision);
    EXPECT_EQ(r.train.precision, precision);
    EXPECT_EQ(r.rank, 3);
    EXPECT_EQ(r.world_size, 4);
    EXPECT_EQ(r.engine.local_rank, 1);
    EXPECT_EQ(r.engine.ranks_per_worker, 2);
    EXPECT_EQ(r.telemetry.rank, 3);
    EXPECT_EQ(r.telemetry.job, "j");
    EXPECT_EQ(r.telemetry.metrics_port, uint16_t{9400});
    EXPECT_EQ(r.launch.job_name, "j") << "the rendezvous is built from the same launch contract";
  }
}

TEST(RunOptions, EnvironmentOverridesAreRecorded) {
  const api::TrainingJob job = example("fashion-mnist.yaml");  // algorithm: auto, timeoutSeconds default 300
  const auto env =
      tunables::Snapshot::of({{"TORUS_ALLREDUCE_ALGO", "hierarchical"}, {"TORUS_COMM_TIMEOUT_MS", "1500"}});
  const RunOptions r = run_options(job.spec, ranks(2), env);
  EXPECT_EQ(r.comm.algorithm, api::AllReduceAlgorithm::kHierarchical);
  EXPECT_EQ(r.comm.timeout, std::chrono::milliseconds(1500));
  ASSERT_EQ(r.overrides.size(), 2u);
  EXPECT_EQ(describe(r.overrides[0]),
            "TORUS_ALLREDUCE_ALGO=hierarchical overrides spec.allReduce.algorithm (job: auto)");
  EXPECT_EQ(describe(r.overrides[1]),
            "TORUS_COMM_TIMEOUT_MS=1500 overrides spec.allReduce.timeoutSeconds (job: 300 s)");
  EXPECT_EQ(r.tunables, (std::vector<std::string>{"TORUS_ALLREDUCE_ALGO=hierarchical", "TORUS_COMM_TIMEOUT_MS=1500"}));
  EXPECT_EQ(r.developer.describe(), r.tunables) << "what the comm layer reads is what the rank logs";
  const std::vector<std::string> block = describe(r);
  EXPECT_NE(std::find(block.begin(), block.end(), "environment override: " + describe(r.overrides[0])), block.end());
  EXPECT_THROW(run_options(job.spec, ranks(2), tunables::Snapshot::of({{"TORUS_ALLREDUCE_ALGO", "tree"}})),
               InvalidArgument);
  EXPECT_THROW(tunables::Snapshot::of({{"TORUS_COMM_TIMEOUT_MS", "soon"}}), InvalidArgument);
  EXPECT_THROW(tunables::Snapshot::of({{"TORUS_NOT_DECLARED", "1"}}), InvalidArgument);
}

TEST(RunOptions, TheWorkersScheduleIsTheOneLearningRateFormula) {
  // ImageNet's piecewise-linear schedule is per 256 images: the trainer scales it by the phase's global batch.
  const RunOptions r = run_options(example("imagenet-resnet50.yaml").spec, ranks(128), tunables::Snapshot{});
  const optim::LrSchedule lr(r.train.lr_points);
  EXPECT_NEAR(lr.at(3), 0.06, 1e-12);
  EXPECT_NEAR(lr.at(18.999), 0.1, 1e-9);
  EXPECT_NEAR(lr.at(19), 0.03, 1e-12);
  EXPECT_NEAR(lr.at(50), 0.0002, 1e-12);
  EXPECT_EQ(r.train.lr_reference_batch, 256);
}

TEST(RunOptions, UnsetNumClassesOnAnImageFolderIsLearnedFromTheData) {
  api::TrainingJob job = example("fashion-mnist.yaml");
  job.spec.data.dataset = api::Dataset::kImageFolder;
  job.spec.data.path = "/data/folders";
  job.spec.model.num_classes.reset();
  EXPECT_EQ(run_options(job.spec, ranks(2), tunables::Snapshot{}).train.model.num_classes, 0)
      << "0: the trainer takes the class folders' count";
}

}  // namespace
}  // namespace torus::worker::app

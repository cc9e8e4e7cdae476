// torus-worker's composition root: RunOptions computed once reach the trainer, the backend and the telemetry (the
// job's precision is what the trainer builds and exports, everySteps alone checkpoints by steps only), one rank of a
// small synthetic job runs to its target, and the command line.
#include "worker/app/worker_main.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/api/defaults.h"
#include "common/util/error.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/pretend_device_backend.h"
#include "tests/worker/recording_backend.h"
#include "tests/worker/synthetic_job.h"

namespace torus::worker::app {
namespace {

using testing::PretendDeviceBackend;
using train::testing::synthetic_job;

RunOptions one_rank(const api::TrainingJob& job) {
  return run_options(job.spec, launch::RankEnv{}, tunables::Snapshot{});
}

bool has_line(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(part) != std::string::npos; });
}

TEST(WorkerMain, RunsOneRankOfASyntheticJobToItsTarget) {
  const RunOptions run = one_rank(synthetic_job());
  const auto backend = make_backend(run);
  train::LocalCollectives alone;
  std::vector<std::string> described;
  const train::RunResult r = train_job(run, *backend, {.collectives = &alone}, &described);
  EXPECT_TRUE(r.reached_target) << "top-1 " << r.last_eval.top1;
  EXPECT_EQ(r.last_eval.samples, 128);
  EXPECT_TRUE(has_line(described, "engine: cpu-onednn, host memory, 1 thread(s), activations f32"));
  EXPECT_TRUE(has_line(described, "precision: fp32 (activations f32"));
}

// A GPU job asking for half precision: the trainer builds its layers in that dtype and says so in what it exports,
// on a device-memory backend that runs half activations (the recording backend, which computes nothing, behind the
// pretend device: device memory and batch staging, as the CUDA backend offers).
TEST(WorkerMain, TheJobsPrecisionIsWhatTheTrainerBuildsAndExports) {
  for (const auto& [precision, dtype] : {std::pair{api::Precision::kBf16, "bf16"}, {api::Precision::kFp16, "f16"}}) {
    api::TrainingJob job = synthetic_job();
    job.spec.gang.device = api::Device::kGpu;
    job.spec.gang.threads_per_process.reset();
    job.spec.training.precision = precision;
    job.spec.training.epochs = 2;  // the one-cycle warms up for one
    job.spec.training.target_accuracy.reset();
    job.spec.data.synthetic.train_images = 64;
    job.spec.data.synthetic.validation_images = 32;
    const RunOptions run = one_rank(job);
    auto recording = std::make_unique<testing::RecordingBackend>();
    const testing::RecordingBackend& ops = *recording;
    PretendDeviceBackend backend({.staging = true}, std::move(recording));
    train::LocalCollectives alone;
    TelemetryOptions t;
    Telemetry telemetry(t);
    std::vector<std::string> described;
    const train::RunResult r =
        train_job(run, backend, {.collectives = &alone, .telemetry = &telemetry, .algorithm = "none"}, &described);
    EXPECT_EQ(r.steps, 4) << "64 images in batches of 32, two epochs";
    const std::string name(api::to_string(precision));
    const std::string metrics = telemetry.registry().expose();
    EXPECT_NE(
        metrics.find("precision=\"" + name + "\",activations=\"" + dtype + "\",backend=\"pretend-device-recording\""),
        std::string::npos)
        << metrics;
    EXPECT_TRUE(has_line(described, "precision: " + name + " (activations " + dtype)) << name;
    EXPECT_TRUE(has_line(described, ", activations " + std::string(dtype))) << "the model line: " << name;
    EXPECT_TRUE(has_line(described, "engine: pretend-device-recording, device memory")) << name;
    ASSERT_FALSE(ops.named("conv").empty());
    EXPECT_EQ(dtype_name(ops.named("conv").front().out), std::string(dtype)) << "what the layers computed in";
  }
}

// The CPU engine runs fp32 only: a half precision that got past validation is refused by the trainer, naming the field.
TEST(WorkerMain, TheCpuEngineRefusesHalfPrecisionNamingTheField) {
  for (const api::Precision precision : {api::Precision::kBf16, api::Precision::kFp16}) {
    api::TrainingJob job = synthetic_job();
    job.spec.training.precision = precision;
    const RunOptions run = one_rank(job);
    const auto backend = make_backend(run);
    train::LocalCollectives alone;
    try {
      train_job(run, *backend, {.collectives = &alone});
      FAIL() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("training.precision: " + std::string(api::to_string(precision))),
                std::string::npos)
          << e.what();
    }
  }
}

// Records the top-1 accuracy of every evaluation.
class Evaluations final : public train::TrainObserver {
 public:
  void on_event(const train::ProgressEvent& e) override {
    if (e.kind == train::EventKind::kEvaluation) top1.push_back(e.accuracy);
  }
  std::vector<double> top1;
};

// spec.training.targetAccuracy at a value the run reaches: it stops after the first evaluation at or above it,
// before its last epoch.
TEST(WorkerMain, TargetAccuracyStopsAtTheFirstEvaluationThatReachesIt) {
  api::TrainingJob job = synthetic_job();
  job.spec.training.epochs = 8;
  job.spec.training.target_accuracy = 0.6;
  const RunOptions run = one_rank(job);
  const auto backend = make_backend(run);
  train::LocalCollectives alone;
  Evaluations seen;
  const train::RunResult r = train_job(run, *backend, {.collectives = &alone, .observer = &seen});
  ASSERT_TRUE(r.reached_target);
  EXPECT_LT(r.epochs_completed, 8) << "stopped early";
  ASSERT_EQ(seen.top1.size(), static_cast<size_t>(r.epochs_completed));
  for (size_t i = 0; i + 1 < seen.top1.size(); ++i) EXPECT_LT(seen.top1[i], 0.6) << "epoch " << i + 1;
  EXPECT_GE(seen.top1.back(), 0.6);
}

// Records the steps at which checkpoints were written.
class Checkpoints final : public train::TrainObserver {
 public:
  void on_event(const train::ProgressEvent& e) override {
    if (e.kind == train::EventKind::kCheckpoint) steps.push_back(e.step);
  }
  std::vector<int64_t> steps;
};

// checkpoint.everySteps alone: a checkpoint every N steps and none at epoch ends (everyEpochs defaults to 1 only when
// everySteps is unset).
TEST(WorkerMain, EveryStepsAloneCheckpointsByStepsOnly) {
  const test::TempDir tmp("worker-main-every-steps");
  api::TrainingJob job = synthetic_job();
  job.spec.training.epochs = 2;
  job.spec.training.target_accuracy.reset();
  job.spec.training.checkpoint.dir = tmp.str();
  job.spec.training.checkpoint.every_steps = 3;
  job.spec.training.checkpoint.every_epochs.reset();
  job.spec.training.checkpoint.keep.reset();
  api::apply_defaults(job);
  const RunOptions run = one_rank(job);  // 256 images, batch 32: 8 steps an epoch, 16 in all
  const auto backend = make_backend(run);
  train::LocalCollectives alone;
  Checkpoints seen;
  std::vector<std::string> described;
  train_job(run, *backend, {.collectives = &alone, .observer = &seen}, &described);
  EXPECT_EQ(seen.steps, (std::vector<int64_t>{3, 6, 9, 12, 15})) << "no checkpoint at the epoch ends (steps 8, 16)";
  std::vector<std::string> files;  // keep defaults to 2: the newest two
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"ckpt-12.torus", "ckpt-15.torus"}));
  EXPECT_TRUE(has_line(described, "checkpoints: " + tmp.str() + ", every 3 steps, keep 2"));
}

TEST(WorkerMain, ArgumentsNameWhatIsWrong) {
  char prog[] = "torus-worker", job[] = "--job", file[] = "x.yaml", bad[] = "--jobs";
  char* ok_argv[] = {prog, job, file};
  EXPECT_EQ(parse_worker_args(3, ok_argv).job_file, "x.yaml");
  char* bad_argv[] = {prog, bad};
  try {
    parse_worker_args(2, bad_argv);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--jobs"), std::string::npos) << e.what();
  }
  char* none_argv[] = {prog};
  const WorkerOptions none = parse_worker_args(1, none_argv);
  EXPECT_TRUE(none.job_file.empty());
  // Without --job, the launch contract's TORUS_JOB_FILE names the job; with neither, the error says so.
  EXPECT_EQ(job_file_of(none, launch::rank_env_from({{"TORUS_JOB_FILE", "/etc/torus/job/job.json"}})),
            "/etc/torus/job/job.json");
  EXPECT_EQ(job_file_of(parse_worker_args(3, ok_argv), launch::rank_env_from({{"TORUS_JOB_FILE", "y.json"}})),
            "x.yaml");
  try {
    job_file_of(none, launch::rank_env_from({}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("TORUS_JOB_FILE"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torus::worker::app

// Each TrainingJob field that `torus run` carries to the ranks, shown from outside: the real `torus` and
// `torus-worker` binaries run tiny synthetic jobs (2 ranks, seconds each) and the tests read what a person reads:
// the summary and its RESULT line, the exit code, the ranks' logs, the checkpoint files.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/conformance/job_runs.h"
#include "tests/support/temp_dir.h"
#include "worker/data/jpeg_folder.h"

namespace torus {
namespace {

using namespace conformance;

TEST(Conformance, AllReduceAlgorithmIsWhatRuns) {
  const test::TempDir tmp("conformance-algorithm");
  // On one host `auto` picks hierarchical (shared memory) for gradient buckets; the job asks for ring.
  const RunOutput ring = run(write_job(tmp.path(), "ring", "  allReduce: {algorithm: ring}\n"));
  ASSERT_EQ(ring.exit_code, 0) << ring.text();
  EXPECT_EQ(ring.field("allreduce_algorithm"), "ring") << ring.text();
  const RunOutput hierarchical =
      run(write_job(tmp.path(), "hier", "  allReduce: {algorithm: hierarchical}\n"),
          {"spec.training.batchSize=null", "spec.training.perRankBatchSize=4",
           "spec.training.lrSchedule={points: [{epoch: 0, lr: 0.05}, {epoch: 1, lr: 0.01}]}"});
  ASSERT_EQ(hierarchical.exit_code, 0) << hierarchical.text();
  EXPECT_EQ(hierarchical.field("allreduce_algorithm"), "hierarchical") << hierarchical.text();
}

TEST(Conformance, Torus2dRunsOnTheJobsGrid) {
  const test::TempDir tmp("conformance-grid");
  // 6 ranks: the grid formula alone would pick 3x2, the defaults (x = processesPerWorker) 2x3; each given grid wins.
  for (const char* grid : {"2x3", "3x2"}) {
    const std::string x(1, grid[0]), y(1, grid[2]);
    const RunOutput out =
        run(write_job(tmp.path(), std::string("grid-") + grid,
                      "  allReduce: {algorithm: torus2d, grid: {x: " + x + ", y: " + y + "}}\n"),
            {"spec.gang={workers: 3, processesPerWorker: 2, threadsPerProcess: 1}", "spec.training.batchSize=24"});
    ASSERT_EQ(out.exit_code, 0) << out.text();
    EXPECT_EQ(out.field("allreduce_algorithm"), "torus2d") << out.text();
    EXPECT_TRUE(has(out, std::string("torus grid ") + grid)) << out.text();
  }
}

TEST(Conformance, Fp16CompressionHalvesTheBytesPerAllReduce) {
  const test::TempDir tmp("conformance-compression");
  const RunOutput plain = run(write_job(tmp.path(), "plain", "  allReduce: {algorithm: ring, compression: none}\n"));
  const RunOutput fp16 = run(write_job(tmp.path(), "fp16", "  allReduce: {algorithm: ring, compression: fp16}\n"));
  ASSERT_EQ(plain.exit_code, 0) << plain.text();
  ASSERT_EQ(fp16.exit_code, 0) << fp16.text();
  ASSERT_FALSE(plain.field("allreduce_bytes_per_call").empty()) << plain.text();
  ASSERT_FALSE(fp16.field("allreduce_bytes_per_call").empty()) << fp16.text();
  const double ratio =
      std::stod(fp16.field("allreduce_bytes_per_call")) / std::stod(plain.field("allreduce_bytes_per_call"));
  // Gradients travel as 2-byte halves; the few fp32 scalar reductions (stop agreement, metrics) stay 4 bytes.
  EXPECT_NEAR(ratio, 0.5, 0.03) << plain.result_line() << "\n" << fp16.result_line();
}

// The gradient buckets are what each all-reduce carries: with bucketSizeMB and firstBucketSizeMB at 4 KiB, the
// gradients of this ResNet-9 (about 42 KB) go in many calls of at most a few KiB (a parameter larger than a bucket is
// a bucket of its own: at most 9 KiB here); with the defaults (1 MiB first, 25 MiB) in one call a step.
TEST(Conformance, BucketSizesAreTheBytesPerAllReduce) {
  const test::TempDir tmp("conformance-buckets");
  const RunOutput whole = run(write_job(tmp.path(), "whole", "  allReduce: {algorithm: ring}\n"));
  const RunOutput small =
      run(write_job(tmp.path(), "small",
                    "  allReduce: {algorithm: ring, bucketSizeMB: 0.00390625, firstBucketSizeMB: 0.00390625}\n"));
  ASSERT_EQ(whole.exit_code, 0) << whole.text();
  ASSERT_EQ(small.exit_code, 0) << small.text();
  ASSERT_FALSE(whole.field("allreduce_bytes_per_call").empty()) << whole.text();
  const double whole_bytes = std::stod(whole.field("allreduce_bytes_per_call"));
  const double small_bytes = std::stod(small.field("allreduce_bytes_per_call"));
  EXPECT_LE(small_bytes, 9216) << small.result_line();
  EXPECT_GT(whole_bytes, 4 * small_bytes) << whole.result_line() << "\n" << small.result_line();
}

TEST(Conformance, TimeoutSecondsTurnsAPausedPeerIntoACollectiveTimeout) {
  const test::TempDir tmp("conformance-timeout");
  // Long enough that rank 1 is paused while training (many steps), short enough to finish if it were not.
  const fs::path job = write_job(tmp.path(), "stall", "  allReduce: {algorithm: ring, timeoutSeconds: 2}\n");
  std::atomic<pid_t> paused{0};
  bool training = false;  // rank 0 logged its effective configuration: every rank has joined
  const RunOutput out = run_torus(
      {"run", job.string(), "--set", "spec.data.synthetic.trainImages=4096", "--set", "spec.training.epochs=20"},
      seconds(120), [&](pid_t torus, const std::string& line) {
        training = training || line.find("effective configuration") != std::string::npos;
        // Rank 0 gave up: let rank 1 see the stop request now rather than after torus's grace period.
        if (paused.load() != 0 && line.find("rank 0 exited with code") != std::string::npos) ::kill(paused, SIGCONT);
        if (!training || paused.load() != 0) return;
        if (auto pid = test::worker_pid(torus, 1)) {
          ::kill(*pid, SIGSTOP);  // a peer that hangs: alive, silent
          paused.store(*pid);
        }
      });
  ASSERT_NE(paused.load(), 0) << out.text();
  EXPECT_EQ(out.field("phase"), "Failed") << out.text();
  EXPECT_TRUE(has(out, "rank 0 exited with code 43")) << "43: CollectiveTimeout\n" << out.text();
  EXPECT_TRUE(has(out, "did not finish within 2000 ms")) << out.text();
}

std::vector<std::byte> initial_params(const fs::path& dir, const std::string& name, int seed) {
  // lr 0 at step 0 (one-cycle from initial 0): the step-1 checkpoint holds the initial weights, untouched.
  const fs::path ckpt = dir / (name + "-ckpt");
  const RunOutput out = run(write_job(dir, name, "",
                                      "    seed: " + std::to_string(seed) + "\n    checkpoint: {dir: " + ckpt.string() +
                                          ", everySteps: 1, keep: 8}\n"),
                            {"spec.training.lrSchedule={peak: 0.1, initial: 0, warmupEpochs: 0.5}"});
  EXPECT_EQ(out.exit_code, 0) << out.text();
  const fs::path first = ckpt / out.field("run") / "ckpt-1.torus";  // the run's own folder
  if (!fs::exists(first)) {
    ADD_FAILURE() << "no " << first << "\n" << out.text();
    return {};
  }
  const worker::checkpoint::CheckpointReader reader(first.string());
  const auto params = reader.section("params");
  return {params.begin(), params.end()};
}

TEST(Conformance, SeedInitializesTheWeights) {
  const test::TempDir tmp("conformance-seed");
  const auto a = initial_params(tmp.path(), "seed-a", 1);
  const auto again = initial_params(tmp.path(), "seed-again", 1);
  const auto b = initial_params(tmp.path(), "seed-b", 2);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, again) << "the same seed gives the same initial weights";
  EXPECT_NE(a, b) << "another seed gives other initial weights";
}

TEST(Conformance, RankZeroSaysWhatItRunsAndEveryRankNamesItsOverride) {
  const test::TempDir tmp("conformance-effective");
  const fs::path ckpt = tmp.path() / "ckpt";
  const fs::path job = write_job(
      tmp.path(), "effective", "  allReduce: {bucketSizeMB: 2, firstBucketSizeMB: 0.5, timeoutSeconds: 30}\n",
      "    seed: 3\n"
      "    optimizer: {type: sgd, momentum: 0.8, nesterov: true, weightDecay: 0.001, noDecayOnNormAndBias: false}\n"
      "    labelSmoothing: 0.1\n"
      "    targetAccuracy: 1.0\n"
      "    validationImageSize: 12\n"
      "    augmentation: {flip: false, cropPadding: 2}\n"
      "    phases:\n"
      "    - {fromEpoch: 0, toEpoch: 1, batchSize: 32}\n"
      "    - {fromEpoch: 1, toEpoch: 2, imageSize: 12, perRankBatchSize: 4}\n"
      "    checkpoint: {dir: " +
          ckpt.string() + ", everyEpochs: 1, keep: 1}\n");
  const RunOutput out = run_torus(
      {"run", job.string(), "--set", "spec.gang={workers: 1, processesPerWorker: 2, threadsPerProcess: 1}", "--set",
       "spec.model={arch: resnet9, widths: [8, 8, 16, 16], pooling: avg, inputChannels: 1, numClasses: 6}", "--set",
       "spec.data={dataset: synthetic, imageSize: 8, loaderThreads: 1, synthetic: {trainImages: 64, validationImages: "
       "32, numClasses: 4}}",
       "--set", "spec.training.epochs=2", "--set",
       "spec.training.lrSchedule={type: one-cycle, peak: 0.2, warmupEpochs: 1, initial: 0.02, final: 0.001, "
       "referenceBatchSize: 8}"},
      seconds(180), nullptr, {{"TORUS_ALLREDUCE_ALGO", "ring"}});
  ASSERT_EQ(out.exit_code, 0) << out.text();
  for (const char* line : {
           "world: 2 rank(s)",
           // numClasses 6 over synthetic labels of 4 classes: the head is the job's, not the data's.
           "model: resnet9, widths [8, 8, 16, 16], stem cifar, pooling avg, zero-init residual off, classes 6, "
           "activations f32",
           "data: synthetic (64 training and 32 validation images of 4 classes, 1 channel(s)), loader threads 1, flip "
           "off, crop pad "
           "2 "
           "and crop, validation image 12",
           "optimizer: sgd, momentum 0.8, nesterov on, weight decay 0.001 (all), label smoothing 0.1",
           "learning rate through (epoch, lr): (0, 0.02) (1, 0.2) (2, 0.001), times the phase's global batch / 8; "
           "stop at top-1 1",
           "phase 0: epochs [0, 1), per-rank batch 16, image 8", "phase 1: epochs [1, 2), per-rank batch 4, image 12",
           "engine: cpu-onednn, host memory, 1 thread(s), activations f32",
           "precision: fp32 (activations f32, fp32 master weights, no loss scaling)",
           "seed: 3 (weights and data order)", "buckets 0.5 MiB first then 2 MiB", "collective timeout 30000 ms",
           "finished: 2 epochs, 10 steps",  // 64 images: 2 global batches of 32, then 8 of 2 x 4
       }) {
    EXPECT_TRUE(has(out, line)) << "rank 0 did not say \"" << line << "\"\n" << out.text();
  }
  const fs::path run_dir = ckpt / out.field("run");
  EXPECT_TRUE(has(out, "checkpoints: " + run_dir.string() + ", every 1 epoch(s), keep 1")) << out.text();
  for (const char* rank : {"[rank 0]", "[rank 1]"}) {
    bool said = false;
    for (const auto& l : out.lines) {
      said = said || (l.rfind(rank, 0) == 0 &&
                      l.find("environment override: TORUS_ALLREDUCE_ALGO=ring overrides spec.allReduce.algorithm "
                             "(job: auto)") != std::string::npos);
    }
    EXPECT_TRUE(said) << rank << " did not log its override\n" << out.text();
  }
  EXPECT_EQ(out.field("allreduce_algorithm"), "ring") << out.text();
  // keep: 1 over two epoch checkpoints leaves the newest only.
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(run_dir)) kept.push_back(e.path().filename().string());
  EXPECT_EQ(kept, (std::vector<std::string>{"ckpt-10.torus"})) << out.text();
}

// root/{train,val}/class-NN/*.jpg: `classes` folders of small flat-colored JPEGs.
void write_image_folder(const fs::path& root, int classes) {
  for (const auto& [split, per_class] : {std::pair<const char*, int>{"train", 2}, {"val", 1}}) {
    for (int c = 0; c < classes; ++c) {
      const fs::path dir = root / split / ("class-" + std::to_string(100 + c));
      fs::create_directories(dir);
      for (int i = 0; i < per_class; ++i) {
        const std::vector<uint8_t> rgb(16 * 16 * 3, static_cast<uint8_t>(10 + 20 * c + i));
        const std::vector<uint8_t> jpeg = worker::data::encode_jpeg(rgb.data(), 16, 16, 90);
        std::ofstream(dir / (std::to_string(i) + ".jpg"), std::ios::binary)
            .write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
      }
    }
  }
}

TEST(Conformance, ImageFolderClassesDefaultToItsClassFolders) {
  const test::TempDir tmp("conformance-classes");
  write_image_folder(tmp.path() / "photos", 12);  // more than the 10 a fixed default would give
  // A ResNet-18 with the ImageNet stem and zero-init residuals, random-resized crops and rectangular validation.
  const RunOutput out =
      run(write_job(tmp.path(), "folders", ""),
          {"spec.data={dataset: imagefolder, path: " + (tmp.path() / "photos").string() +
               ", imageSize: 32, loaderThreads: 1}",
           "spec.model={arch: resnet18, widths: [8, 8, 8, 8], stem: imagenet, zeroInitResidual: true}",
           "spec.training.batchSize=8", "spec.training.augmentation={randomResizedCropMinScale: 0.5}",
           "spec.training.rectangularValidation=true", "spec.training.validationImageSize=24"});
  EXPECT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("phase"), "Succeeded") << out.text();
  for (const char* line :
       {"model: resnet18, widths [8, 8, 8, 8], stem imagenet, pooling avg, zero-init residual on, classes 12",
        "data: imagefolder, loader threads 1, flip on, crop random-resized, min scale 0.5, validation image 24 "
        "(rectangular)"}) {
    EXPECT_TRUE(has(out, line)) << "rank 0 did not say \"" << line << "\"\n" << out.text();
  }
}

TEST(Conformance, SuspendStartsNothing) {
  const test::TempDir tmp("conformance-suspend");
  const RunOutput out = run(write_job(tmp.path(), "held", "  runPolicy: {suspend: true}\n"));
  EXPECT_EQ(out.exit_code, 0) << out.text();
  EXPECT_EQ(out.field("phase"), "Suspended") << out.text();
  EXPECT_TRUE(has(out, "nothing started")) << out.text();
  EXPECT_FALSE(has(out, "torus run: job held, 2 rank(s)")) << "a worker was started:\n" << out.text();
}

TEST(Conformance, AFailingRanksOwnErrorIsTheSummarysReason) {
  const test::TempDir tmp("conformance-error");
  const fs::path data = tmp.path() / "cifar";
  fs::create_directories(data);
  for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                        "data_batch_5.bin", "test_batch.bin"})
    std::ofstream(data / f) << std::string(3073 + 100, '\1');  // one record and a piece of the next
  const RunOutput out =
      run(write_job(tmp.path(), "truncated", ""),
          {"spec.data={dataset: cifar10, path: " + data.string() + "}", "spec.model.inputChannels=3"});
  EXPECT_EQ(out.field("phase"), "Failed") << out.text();
  std::string phase_line;
  for (const auto& l : out.lines)
    if (l.rfind("phase: ", 0) == 0) phase_line = l;
  EXPECT_NE(phase_line.find("truncated"), std::string::npos) << "the summary quotes the rank:\n" << out.text();
}

TEST(Conformance, BadCombinationsAreRefusedBeforeAnythingStarts) {
  const test::TempDir tmp("conformance-refused");
  const RunOutput out = run(write_job(tmp.path(), "refused", "", "    precision: bf16\n"),
                            {"spec.model.stem=imagenet", "spec.model.zeroInitResidual=true",
                             "spec.training.augmentation={cropPadding: 4, randomResizedCropMinScale: 0.5}",
                             "spec.data={dataset: cifar10, path: /nonexistent}", "spec.model.inputChannels=1"});
  EXPECT_EQ(out.exit_code, 1) << out.text();
  for (const char* refusal : {"spec.training.precision: the CPU engine trains in fp32", "spec.model.stem: resnet9 has",
                              "spec.model.zeroInitResidual: resnet9's residual blocks",
                              "spec.training.augmentation.cropPadding: pad-and-crop and random-resized crop",
                              "spec.model.inputChannels: must be 3 for cifar10"}) {
    EXPECT_TRUE(has(out, refusal)) << refusal << "\n" << out.text();
  }
  EXPECT_FALSE(has(out, "torus run: job refused")) << "a worker was started:\n" << out.text();
}

// No field is ignored without a word: what nothing would read is refused by name before anything starts (the job
// is validated the same way by the operator), and what only the operator applies is named once by torus run.
TEST(Conformance, FieldsNothingWouldReadAreRefusedAndOperatorOnlyOnesAreNamed) {
  const test::TempDir tmp("conformance-refused");
  const fs::path job = write_job(tmp.path(), "refused", "");
  const std::vector<std::pair<std::vector<std::string>, std::string>> refusals = {
      {{"spec.runPolicy.schedulingPolicy.queue=team-a"},
       "spec.runPolicy.schedulingPolicy.queue: only Volcano's PodGroup has a queue"},
      {{"spec.runPolicy.schedulingPolicy.minAvailable=2"},
       "spec.runPolicy.schedulingPolicy.minAvailable: is the minMember of the PodGroup the operator makes"},
      {{"spec.gang={workers: 2, device: gpu}", "spec.allReduce.algorithm=ring"},
       "spec.allReduce.algorithm: GPU workers average gradients with NCCL"},
      {{"spec.gang={workers: 2, device: gpu, resources: {limits: {nvidia.com/gpu: 3}}}"},
       "spec.gang.resources.limits.nvidia.com/gpu: a GPU worker pod gets one GPU per process"},
  };
  for (const auto& [sets, said] : refusals) {
    const RunOutput out = run(job, sets);
    EXPECT_EQ(out.exit_code, 1) << sets.front() << "\n" << out.text();
    EXPECT_TRUE(has(out, said)) << sets.front() << "\n" << out.text();
    EXPECT_FALSE(has(out, "torus run: job")) << "a process was started:\n" << out.text();
  }
  const RunOutput named = run(job, {"spec.training.checkpoint={dir: " + (tmp.path() / "ckpt").string() +
                                    ", volumeClaimTemplate: {spec: {resources: {requests: {storage: 1Gi}}}}}"});
  EXPECT_EQ(named.exit_code, 0) << named.text();
  EXPECT_TRUE(has(named,
                  "torus run: not applied here (the operator applies them to pods): "
                  "spec.training.checkpoint.volumeClaimTemplate"))
      << named.text();
}

}  // namespace
}  // namespace torus

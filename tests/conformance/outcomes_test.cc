// TrainingJob fields shown by what the run leaves behind, never by rank 0's log of its settings (issue 40.2): the
// model's parameter count and initial weights in the checkpoint files, the weights a few steps learn, the evaluation
// the summary reports, the steps the checkpoints are named after, one log file per rank, the exit code. Each run is
// one or two ranks of a tiny synthetic job (tests/conformance/job_runs.h), a fraction of a second to a few seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/conformance/job_runs.h"
#include "tests/support/temp_dir.h"

namespace torus {
namespace {

using namespace conformance;

size_t parameter_count(const fs::path& dir, const std::string& name, const std::vector<std::string>& sets) {
  const Trained t = train(dir, name, sets);
  return t.final_params().size();
}

// The model's shape fields, each by the number of parameters it makes (the checkpoint's "params" section): the
// classifier has numClasses x (last width + 1) weights, the stem convolution inputChannels x k x k x first width
// (k = 3 for the CIFAR stem, 7 for the ImageNet one), and more or wider stages mean more weights.
TEST(Conformance, ParameterCountsFollowTheModel) {
  const test::TempDir tmp("conformance-params");
  const auto count = [&](const std::string& name, const std::string& model) {
    return parameter_count(tmp.path(), name, {"spec.model=" + model});
  };
  const size_t resnet9 = count("base", "{arch: resnet9, widths: [8, 8, 16, 16], inputChannels: 1, numClasses: 4}");
  ASSERT_GT(resnet9, 0u);
  EXPECT_EQ(count("classes", "{arch: resnet9, widths: [8, 8, 16, 16], inputChannels: 1, numClasses: 6}"),
            resnet9 + 2 * (16 + 1))
      << "numClasses: two more classes, each 16 weights and a bias";
  EXPECT_EQ(count("channels", "{arch: resnet9, widths: [8, 8, 16, 16], inputChannels: 3, numClasses: 4}"),
            resnet9 + 2 * 3 * 3 * 8)
      << "inputChannels: two more input channels into the 3x3 stem of 8 filters";
  EXPECT_GT(count("widths", "{arch: resnet9, widths: [8, 8, 16, 32], inputChannels: 1, numClasses: 4}"), resnet9)
      << "widths: a wider last stage";
  const size_t resnet18 =
      count("resnet18", "{arch: resnet18, widths: [8, 8, 8, 8], inputChannels: 1, numClasses: 4, stem: cifar}");
  EXPECT_NE(resnet18, resnet9) << "arch";
  EXPECT_EQ(
      count("imagenet", "{arch: resnet18, widths: [8, 8, 8, 8], inputChannels: 1, numClasses: 4, stem: imagenet}"),
      resnet18 + (7 * 7 - 3 * 3) * 8)
      << "stem: the ImageNet stem's 7x7 convolution instead of the CIFAR stem's 3x3";
}

// zeroInitResidual: every residual block's last batch-norm scale starts at zero (ResNet-18: 8 blocks of 8 channels
// here), seen in the weights of the first checkpoint of a run whose first step has a learning rate of 0.
TEST(Conformance, ZeroInitResidualZeroesEveryBlocksLastScale) {
  const test::TempDir tmp("conformance-zero-init");
  const auto zeros_at_start = [&](const std::string& name, const std::string& zero_init) {
    const Trained t = train(tmp.path(), name,
                            {"spec.model={arch: resnet18, widths: [8, 8, 8, 8], zeroInitResidual: " + zero_init + "}",
                             "spec.training.lrSchedule={peak: 0.1, initial: 0, warmupEpochs: 0.5}"});
    if (!t.checkpoints.count(1)) {
      ADD_FAILURE() << name << ": no checkpoint of step 1\n" << t.out.text();
      return 0L;
    }
    const std::vector<float> params = params_of(t.checkpoints.at(1));
    return static_cast<long>(std::count(params.begin(), params.end(), 0.0f));
  };
  EXPECT_EQ(zeros_at_start("on", "true") - zeros_at_start("off", "false"), 8 * 8);
}

// Fields that change what training learns: each run differs from the base run in that field alone, and its weights
// after the epoch's 4 steps differ from the base run's, which a second base run reproduces exactly (so a difference
// is the field's, not noise).
TEST(Conformance, EachLearningFieldChangesWhatIsLearned) {
  const test::TempDir tmp("conformance-learning");
  const std::vector<std::string> base = {
      "spec.training.optimizer={type: sgd, momentum: 0.9, nesterov: false, weightDecay: 0.01, "
      "noDecayOnNormAndBias: true}",
      "spec.training.lrSchedule={type: one-cycle, peak: 0.2, initial: 0.02, final: 0.001, warmupEpochs: 0.5}",
      "spec.training.augmentation={flip: false, cropPadding: 0}"};
  const std::vector<float> reference = train(tmp.path(), "base", base).final_params();
  ASSERT_FALSE(reference.empty());
  ASSERT_EQ(train(tmp.path(), "again", base).final_params(), reference) << "the base run is not reproducible";
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"momentum", "spec.training.optimizer.momentum=0.5"},
      {"nesterov", "spec.training.optimizer.nesterov=true"},
      {"weightDecay", "spec.training.optimizer.weightDecay=0.2"},
      {"noDecayOnNormAndBias", "spec.training.optimizer.noDecayOnNormAndBias=false"},
      {"labelSmoothing", "spec.training.labelSmoothing=0.2"},
      {"peak", "spec.training.lrSchedule.peak=0.4"},
      {"initial", "spec.training.lrSchedule.initial=0.1"},
      {"final", "spec.training.lrSchedule.final=0.1"},
      {"warmupEpochs", "spec.training.lrSchedule.warmupEpochs=0.25"},
      {"referenceBatchSize", "spec.training.lrSchedule.referenceBatchSize=64"},
      {"type and points[].epoch, points[].lr",
       "spec.training.lrSchedule={type: piecewise-linear, points: [{epoch: 0, lr: 0.2}, {epoch: 1, lr: 0.01}]}"},
      {"points[].lr", "spec.training.lrSchedule={points: [{epoch: 0, lr: 0.3}, {epoch: 1, lr: 0.01}]}"},
      {"points[].epoch", "spec.training.lrSchedule={points: [{epoch: 0, lr: 0.2}, {epoch: 2, lr: 0.01}]}"},
      {"flip", "spec.training.augmentation.flip=true"},
      {"cropPadding", "spec.training.augmentation.cropPadding=2"},
      {"randomResizedCropMinScale", "spec.training.augmentation.randomResizedCropMinScale=0.5"},
      {"imageSize", "spec.data.imageSize=12"},
      {"synthetic.numClasses", "spec.data.synthetic.numClasses=3"},
      {"phases[].imageSize", "spec.training.phases=[{fromEpoch: 0, toEpoch: 1, imageSize: 12}]"},
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& [field, set] = variants[i];
    std::vector<std::string> sets = base;
    sets.push_back(set);
    EXPECT_NE(train(tmp.path(), "variant-" + std::to_string(i), sets).final_params(), reference)
        << field << " (" << set << ") changed nothing";
  }
  // pooling (ResNet-9's default is max): on 8x8 images the last feature map is 1x1, where max and average pooling
  // agree; at 32x32 it is 4x4.
  std::vector<std::string> larger = base;
  larger.push_back("spec.data.imageSize=32");
  const std::vector<float> max_pooled = train(tmp.path(), "max-32", larger).final_params();
  larger.push_back("spec.model.pooling=avg");
  EXPECT_NE(train(tmp.path(), "avg-32", larger).final_params(), max_pooled) << "pooling changed nothing";
}

// Fields of the evaluation alone: the same training, another validation loss in the summary's epoch table
// (validationImages: another set of images; validationImageSize: the images evaluated at another size).
TEST(Conformance, EvaluationFieldsChangeWhatIsMeasured) {
  const test::TempDir tmp("conformance-evaluation");
  const double reference = val_loss(train(tmp.path(), "base", {}).out);
  ASSERT_GT(reference, 0);
  EXPECT_EQ(val_loss(train(tmp.path(), "again", {}).out), reference) << "the evaluation is not reproducible";
  EXPECT_NE(val_loss(train(tmp.path(), "fewer", {"spec.data.synthetic.validationImages=16"}).out), reference)
      << "validationImages";
  EXPECT_NE(val_loss(train(tmp.path(), "larger", {"spec.training.validationImageSize=12"}).out), reference)
      << "validationImageSize";
}

// The steps a run takes, read from the checkpoints named after them: trainImages / global batch per epoch, for
// `epochs` epochs; batchSize is the global batch, perRankBatchSize the batch of each of the 2 ranks; phases switch
// the batch at their fromEpoch until their toEpoch. checkpoint.everyEpochs writes at those epochs' ends, keep keeps
// the newest.
TEST(Conformance, StepsFollowTheBatchesAndCheckpointsTheirSchedule) {
  const test::TempDir tmp("conformance-steps");
  const auto steps = [&](const std::string& name, const std::string& checkpoint, const std::vector<std::string>& sets) {
    const fs::path ckpt = tmp.path() / (name + "-ckpt");
    const RunOutput out = run(
        write_job(tmp.path(), name, "", "    checkpoint: {dir: " + ckpt.string() + ", " + checkpoint + "}\n"), sets);
    EXPECT_EQ(out.exit_code, 0) << name << "\n" << out.text();
    return checkpoint_steps(ckpt);
  };
  using Steps = std::vector<int64_t>;
  const std::string every_epoch = "everyEpochs: 1, keep: 10";
  EXPECT_EQ(steps("base", every_epoch, {}), (Steps{4})) << "64 images in global batches of 16";
  EXPECT_EQ(steps("images", every_epoch, {"spec.data.synthetic.trainImages=128"}), (Steps{8})) << "trainImages";
  EXPECT_EQ(steps("batch", every_epoch, {"spec.training.batchSize=32"}), (Steps{2})) << "batchSize";
  EXPECT_EQ(steps("per-rank", every_epoch, {"spec.training.batchSize=null", "spec.training.perRankBatchSize=4"}),
            (Steps{8}))
      << "perRankBatchSize: 2 ranks of 4";
  EXPECT_EQ(steps("epochs", every_epoch, {"spec.training.epochs=2"}), (Steps{4, 8})) << "epochs";
  const std::string phases =
      "spec.training.phases=[{fromEpoch: 0, toEpoch: 1, batchSize: 32}, {fromEpoch: 1, toEpoch: 3, "
      "perRankBatchSize: 4}]";
  EXPECT_EQ(steps("phases", every_epoch, {"spec.training.epochs=3", phases}), (Steps{2, 10, 18}))
      << "phases: 2 steps of 32, then 8 a epoch of 2 x 4";
  EXPECT_EQ(steps("keep", "everyEpochs: 1, keep: 1", {"spec.training.epochs=3", phases}), (Steps{18})) << "keep";
  EXPECT_EQ(steps("every-2", "everyEpochs: 2, keep: 10", {"spec.training.epochs=3", phases}), (Steps{10}))
      << "everyEpochs: the second epoch's end only";
}

// processesPerWorker: that many ranks per worker, each with its own log (torus run --log-dir): 1 x 2 and 2 x 2.
TEST(Conformance, ProcessesPerWorkerIsRanksPerWorker) {
  const test::TempDir tmp("conformance-processes");
  for (const auto& [workers, per_worker] : {std::pair{1, 2}, std::pair{2, 2}}) {
    const std::string name = "ppw-" + std::to_string(workers) + "x" + std::to_string(per_worker);
    const fs::path logs = tmp.path() / (name + "-logs");
    const RunOutput out =
        run_torus({"run", write_job(tmp.path(), name, "").string(), "--log-dir", logs.string(), "--set",
                   "spec.gang={workers: " + std::to_string(workers) +
                       ", processesPerWorker: " + std::to_string(per_worker) + ", threadsPerProcess: 1}",
                   "--set", "spec.training.batchSize=" + std::to_string(8 * workers * per_worker)},
                  seconds(180));
    ASSERT_EQ(out.exit_code, 0) << out.text();
    std::vector<std::string> ranks;
    for (const auto& e : fs::directory_iterator(logs)) ranks.push_back(e.path().filename().string());
    std::sort(ranks.begin(), ranks.end());
    std::vector<std::string> expected;
    for (int r = 0; r < workers * per_worker; ++r) expected.push_back("rank-" + std::to_string(r) + ".log");
    EXPECT_EQ(ranks, expected) << workers << " worker(s) x " << per_worker;
  }
}

// optimizer.type: SGD is the only optimizer; any other is refused before anything starts (exit code 1, the field
// named), so the field is read.
TEST(Conformance, AnOptimizerOtherThanSgdIsRefused) {
  const test::TempDir tmp("conformance-optimizer");
  const RunOutput out = run(write_job(tmp.path(), "adam", ""), {"spec.training.optimizer={type: adam}"});
  EXPECT_EQ(out.exit_code, 1) << out.text();
  EXPECT_TRUE(has(out, "spec.training.optimizer.type: must be one of \"sgd\", got \"adam\"")) << out.text();
  EXPECT_FALSE(has(out, "torus run: job adam")) << "a worker was started:\n" << out.text();
}

}  // namespace
}  // namespace torus

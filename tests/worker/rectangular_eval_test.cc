// spec.training.rectangularValidation through the worker: the TrainingJob field reaches the evaluation loader, and
// evaluation runs the model on batches of different shapes (fast.ai's rectangular validation), counting every
// validation image exactly once, alone and across ranks. The data set is a real folder of non-square JPEGs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/util/error.h"
#include "tests/support/job_builder.h"
#include "tests/support/temp_dir.h"
#include "tests/worker/thread_collectives.h"
#include "worker/app/job_config.h"
#include "worker/app/run_options.h"
#include "worker/app/worker_main.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/data/jpeg_folder.h"

namespace torus::worker::train {
namespace {

// (H, W) of the validation images: aspect ratios from 1:2 to 2:1, 23 of them (batches of 4 leave a short last one).
const std::vector<std::pair<int, int>> kValSizes = {{20, 40}, {24, 40}, {32, 40}, {40, 40}, {40, 32}, {40, 24},
                                                    {40, 20}, {18, 36}, {30, 45}, {45, 30}, {36, 18}, {28, 42},
                                                    {42, 28}, {33, 44}, {44, 33}, {25, 50}, {50, 25}, {30, 30},
                                                    {27, 36}, {36, 27}, {22, 44}, {44, 22}, {35, 35}};
const std::vector<std::pair<int, int>> kTrainSizes = {{24, 32}, {32, 24}, {28, 28}, {20, 40}, {40, 20}, {30, 36},
                                                      {36, 30}, {26, 39}, {39, 26}, {32, 32}, {22, 33}, {33, 22}};
const std::array<std::string, 3> kClasses = {"circle", "stripes", "tint"};

// A class-dependent picture (so the model's outputs differ between images), encoded as JPEG.
void write_picture(const std::filesystem::path& path, int h, int w, int cls, int index) {
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* px = &rgb[(static_cast<size_t>(y) * w + x) * 3];
      const double dy = (y - h / 2.0) / h, dx = (x - w / 2.0) / w;
      const bool on = cls == 0 ? dx * dx + dy * dy < 0.1 : cls == 1 ? ((x + index) / 3) % 2 == 0 : x > w / 3;
      px[0] = static_cast<uint8_t>(on ? 220 : 30 + 5 * index);
      px[1] = static_cast<uint8_t>(on ? 40 + 60 * cls : 120);
      px[2] = static_cast<uint8_t>((y * 255) / h);
    }
  }
  const std::vector<uint8_t> jpeg = data::encode_jpeg(rgb.data(), h, w, 90);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(jpeg.data(), 1, jpeg.size(), f), jpeg.size());
  std::fclose(f);
}

// root/{train,val}/<class>/*.jpg, classes dealt round robin.
class PhotoFolder {
 public:
  PhotoFolder() {
    write_split("train", kTrainSizes);
    write_split("val", kValSizes);
  }
  std::string root() const { return dir_.str(); }

 private:
  void write_split(const std::string& split, const std::vector<std::pair<int, int>>& sizes) {
    for (const std::string& c : kClasses) std::filesystem::create_directories(dir_.path() / split / c);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int cls = static_cast<int>(i % kClasses.size());
      write_picture(dir_.path() / split / kClasses[static_cast<size_t>(cls)] / ("img" + std::to_string(i) + ".jpg"),
                    sizes[i].first, sizes[i].second, cls, static_cast<int>(i));
    }
  }
  test::TempDir dir_{"torus-rect-eval-test"};
};

api::TrainingJob load_job(const std::string& root, bool rectangular) {
  test::JobBuilder b("rectangular");
  b.input_channels(3).classes(3).image_folder(root).epochs(1).batch_size(4).one_cycle(0.05, 0, 0.05, 0.0).seed(3);
  b.spec().training.rectangular_validation = rectangular;
  b.spec().training.validation_image_size = 16;
  return b.build();
}

std::set<std::pair<int, int>> distinct(const std::vector<data::ImageSize>& sizes) {
  std::set<std::pair<int, int>> out;
  for (const data::ImageSize& s : sizes) out.insert({s.h, s.w});
  return out;
}

class RectangularEval : public ::testing::Test {
 protected:
  PhotoFolder folder_;
};

TEST_F(RectangularEval, TheSpecFieldReachesTheTrainConfig) {
  const TrainConfig on = app::to_train_config(load_job(folder_.root(), true).spec, 1);
  EXPECT_EQ(on.data.rectangular_validation, data::Rectangular::kOn);
  EXPECT_EQ(on.data.validation_image_size, 16);
  EXPECT_EQ(app::to_train_config(load_job(folder_.root(), false).spec, 1).data.rectangular_validation,
            data::Rectangular::kOff);
  // Evaluation batches hold a rank's largest training batch: 4 alone, 2 each for two ranks.
  EXPECT_EQ(on.eval_batch_size, 4);
  api::TrainingJobSpec two = load_job(folder_.root(), true).spec;
  two.gang.workers = 2;
  EXPECT_EQ(app::to_train_config(two, 2).eval_batch_size, 2);
}

TEST_F(RectangularEval, NeedsAValidationImageSize) {
  TrainConfig config = app::to_train_config(load_job(folder_.root(), true).spec, 1);
  config.data.validation_image_size = 0;  // "native size": no shorter side to scale batches to
  try {
    validate(config);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("training.rectangularValidation"), std::string::npos) << e.what();
  }
}

TEST_F(RectangularEval, SquareAndRectangularBothEvaluateEveryImageOnce) {
  const int64_t n = static_cast<int64_t>(kValSizes.size());
  for (const bool rectangular : {false, true}) {
    SCOPED_TRACE(rectangular ? "rectangular" : "square");
    const TrainConfig config = app::to_train_config(load_job(folder_.root(), rectangular).spec, 1);
    auto backend = cpu::make_cpu_backend(1);
    LocalCollectives alone;
    Trainer trainer(*backend, config, load_datasets(config.data, config.seed), alone);
    const EvalResult r = trainer.evaluate();
    EXPECT_EQ(r.samples, n);
    EXPECT_TRUE(std::isfinite(r.loss)) << r.loss;
    EXPECT_GT(r.loss, 0);
    EXPECT_GE(r.top1, 0);
    EXPECT_LE(r.top1, 1);
    EXPECT_EQ(r.batch_sizes.size(), static_cast<size_t>((n + 3) / 4));
    const auto shapes = distinct(r.batch_sizes);
    if (!rectangular) {
      EXPECT_EQ(shapes, (std::set<std::pair<int, int>>{{16, 16}}));
      continue;
    }
    // Batches of different shapes went through the model: portrait, landscape, each with 16 as its shorter side.
    EXPECT_GE(shapes.size(), 3u);
    bool portrait = false, landscape = false;
    for (const auto& [h, w] : shapes) {
      EXPECT_EQ(std::min(h, w), 16) << h << "x" << w;
      EXPECT_EQ(std::max(h, w) % 8, 0) << h << "x" << w;
      portrait = portrait || h > w;
      landscape = landscape || w > h;
    }
    EXPECT_TRUE(portrait);
    EXPECT_TRUE(landscape);
    // Sorted by aspect ratio: widths over heights never decrease from batch to batch.
    for (size_t b = 1; b < r.batch_sizes.size(); ++b) {
      const double before = static_cast<double>(r.batch_sizes[b - 1].w) / r.batch_sizes[b - 1].h;
      EXPECT_LE(before, static_cast<double>(r.batch_sizes[b].w) / r.batch_sizes[b].h) << "batch " << b;
    }
  }
}

TEST_F(RectangularEval, TwoRanksShareTheBatchesRoundRobinAndAgreeWithOneRank) {
  const TrainConfig config = app::to_train_config(load_job(folder_.root(), true).spec, 1);
  const Datasets data = load_datasets(config.data, config.seed);
  EvalResult alone_result;
  {
    auto backend = cpu::make_cpu_backend(1);
    LocalCollectives alone;
    Trainer trainer(*backend, config, data, alone);
    alone_result = trainer.evaluate();
  }
  ASSERT_EQ(alone_result.samples, static_cast<int64_t>(kValSizes.size()));

  testing::Rendezvous rendezvous(2);
  std::array<EvalResult, 2> results;
  std::array<std::string, 2> errors;
  auto rank_main = [&](int rank) {
    try {
      auto backend = cpu::make_cpu_backend(1);
      testing::ThreadCollectives collectives(rendezvous, rank, 2);
      Trainer trainer(*backend, config, data, collectives);
      results[static_cast<size_t>(rank)] = trainer.evaluate();
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::thread second(rank_main, 1);
  rank_main(0);
  second.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (size_t rank = 0; rank < 2; ++rank) {
    const EvalResult& r = results[rank];
    // Summed over ranks: every image once. Same batches as one rank, so the same loss and the same correct count.
    EXPECT_EQ(r.samples, alone_result.samples) << "rank " << rank;
    EXPECT_NEAR(r.loss, alone_result.loss, 1e-6 * alone_result.loss) << "rank " << rank;
    EXPECT_DOUBLE_EQ(r.top1, alone_result.top1) << "rank " << rank;
    // Global batch b goes to rank b % 2.
    std::vector<data::ImageSize> expected;
    for (size_t b = rank; b < alone_result.batch_sizes.size(); b += 2) expected.push_back(alone_result.batch_sizes[b]);
    EXPECT_EQ(r.batch_sizes, expected) << "rank " << rank;
  }
}

class Evaluations final : public TrainObserver {
 public:
  void on_event(const ProgressEvent& e) override {
    if (e.kind == EventKind::kEvaluation) events.push_back(e);
  }
  std::vector<ProgressEvent> events;
};

TEST_F(RectangularEval, ATrainingJobEvaluatesItsEpochOnRectangularBatches) {
  const api::TrainingJob job = load_job(folder_.root(), true);
  const app::RunOptions run = app::run_options(job.spec, launch::RankEnv{}, tunables::Snapshot{});
  const auto backend = app::make_backend(run);
  LocalCollectives alone;
  Evaluations seen;
  const RunResult r = app::train_job(run, *backend, {.collectives = &alone, .observer = &seen});
  EXPECT_EQ(r.epochs_completed, 1);
  EXPECT_EQ(r.steps, static_cast<int64_t>(kTrainSizes.size()) / 4);
  EXPECT_EQ(r.last_eval.samples, static_cast<int64_t>(kValSizes.size()));
  EXPECT_GE(distinct(r.last_eval.batch_sizes).size(), 3u);
  EXPECT_TRUE(std::isfinite(r.last_eval.loss)) << r.last_eval.loss;
  ASSERT_EQ(seen.events.size(), 1u);
  EXPECT_DOUBLE_EQ(seen.events[0].loss, r.last_eval.loss);
}

}  // namespace
}  // namespace torus::worker::train

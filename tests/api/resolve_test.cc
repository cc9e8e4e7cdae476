#include "common/api/resolve.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/api/validation.h"
#include "common/util/error.h"
#include "tests/api/corpus.h"

namespace torus::api {
namespace {

TrainingJob example(const char* name) { return load_job_file((testing::source_dir() / "examples" / name).string()); }

TEST(Resolve, FashionMnistRecipe) {
  const TrainingJobSpec spec = example("fashion-mnist.yaml").spec;
  EXPECT_EQ(world_size(spec), 2);
  const auto phases = resolve_phases(spec);
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0], (ResolvedPhase{0, 4, 28, 256, 128}));
  const int64_t images = known_train_images(spec.data).value();
  EXPECT_EQ(images, 60000);
  EXPECT_EQ(steps_per_epoch(images, 256), 234);  // 60000 / 256, the partial batch dropped
  EXPECT_EQ(total_steps(phases, images), 936);
  const StepPosition mid = locate_step(phases, images, 234 * 2 + 117);
  EXPECT_EQ(mid.epoch, 2);
  EXPECT_EQ(mid.step_in_epoch, 117);
  EXPECT_DOUBLE_EQ(mid.fractional_epoch, 2.5);
}

TEST(Resolve, ImageNetProgressiveResizingScalesTheBatch) {
  const TrainingJobSpec spec = example("imagenet-resnet50.yaml").spec;
  EXPECT_EQ(world_size(spec), 128);
  const auto phases = resolve_phases(spec);
  ASSERT_EQ(phases.size(), 5u);
  EXPECT_EQ(phases[1], (ResolvedPhase{6, 16, 128, 16384, 128}));
  EXPECT_EQ(phases[3], (ResolvedPhase{19, 37, 224, 24576, 192}));
  EXPECT_EQ(phase_for_epoch(phases, 37).image_size, 288);
  EXPECT_EQ(phase_for_epoch(phases, 99).image_size, 288);
  EXPECT_EQ(validation_image_size(spec), 288);
  const int64_t images = 1281167;
  const int64_t first_phase_steps = steps_per_epoch(images, 8192) * 6;
  const StepPosition pos = locate_step(phases, images, first_phase_steps);
  EXPECT_EQ(pos.epoch, 6);
  EXPECT_EQ(pos.step_in_epoch, 0);
}

TEST(Resolve, MissingValues) {
  TrainingJob job = example("fashion-mnist.yaml");
  job.spec.gang.workers.reset();
  EXPECT_THROW(world_size(job.spec), InvalidArgument);
  EXPECT_THROW(steps_per_epoch(100, 0), InvalidArgument);
}

// check_phases: the worker's check of phases built in code (tests, benches) says which phase and field is wrong.
TEST(Resolve, CheckPhasesNamesTheBadPhase) {
  const TrainingJobSpec spec = example("imagenet-resnet50.yaml").spec;
  std::vector<ResolvedPhase> phases = resolve_phases(spec);
  EXPECT_NO_THROW(check_phases(phases, "training.phases"));
  EXPECT_EQ(&phase_for_epoch(phases, 0), &phases[0]);
  EXPECT_EQ(&phase_for_epoch(phases, 6), &phases[1]);

  const auto message = [](std::vector<ResolvedPhase> p) {
    try {
      check_phases(p, "training.phases");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({}), ::testing::HasSubstr("training.phases: needs at least one phase"));
  std::vector<ResolvedPhase> late = phases;
  late[0].from_epoch = 1;
  EXPECT_THAT(message(late), ::testing::HasSubstr("training.phases[0].fromEpoch"));
  std::vector<ResolvedPhase> gap = phases;
  gap[2].from_epoch += 1;
  EXPECT_THAT(message(gap),
              ::testing::HasSubstr("training.phases[2].fromEpoch: phases start at epoch 0 and leave no gap"));
  std::vector<ResolvedPhase> empty_range = phases;
  empty_range[4].to_epoch = empty_range[4].from_epoch;
  EXPECT_THAT(message(empty_range), ::testing::HasSubstr("training.phases[4].toEpoch"));
  std::vector<ResolvedPhase> no_batch = phases;
  no_batch[1].per_rank_batch = 0;
  EXPECT_THAT(message(no_batch),
              ::testing::HasSubstr("training.phases[1].perRankBatchSize: must be a positive integer"));
  std::vector<ResolvedPhase> no_image = phases;
  no_image[3].image_size = -1;
  EXPECT_THAT(message(no_image), ::testing::HasSubstr("training.phases[3].imageSize"));
}

}  // namespace
}  // namespace torus::api

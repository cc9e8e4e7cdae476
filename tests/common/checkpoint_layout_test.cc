// Where a run's checkpoints live, and what a run id may be.
#include "common/launch/checkpoint_layout.h"

#include <gtest/gtest.h>

namespace torus::launch {
namespace {

TEST(CheckpointLayout, EachRunHasAFolderOfItsOwnAndTheUnnamedRunIsTheFolder) {
  EXPECT_EQ(checkpoint_path("/ckpt", "3f2a", 120), "/ckpt/3f2a/ckpt-120.torus");
  EXPECT_EQ(checkpoint_path("/ckpt/", "3f2a", 120), "/ckpt/3f2a/ckpt-120.torus");
  EXPECT_EQ(checkpoint_path("/ckpt", "", 7), "/ckpt/ckpt-7.torus");
  EXPECT_EQ(run_checkpoint_dir("/ckpt", ""), "/ckpt");
  EXPECT_EQ(step_of_checkpoint_file(checkpoint_file_name(1000)), 1000);
  for (const char* other : {"ckpt-.torus", "ckpt-1x.torus", "ckpt--1.torus", "ckpt-3.torus.tmp-1", "notes"})
    EXPECT_EQ(step_of_checkpoint_file(other), std::nullopt) << other;
  EXPECT_TRUE(is_checkpoint_temp_file("ckpt-3.torus.tmp-ab12"));
  EXPECT_FALSE(is_checkpoint_temp_file("ckpt-3.torus"));
}

TEST(CheckpointLayout, ARunIdIsAFolderNameAndNotLatest) {
  for (const char* good : {"20260314-101502-3fa2", "0d4b1c2e-8f3a-4e5b-9c6d-7e8f9a0b1c2d", "a", "v1.2_x"})
    EXPECT_EQ(run_id_problem(good), "") << good;
  EXPECT_NE(run_id_problem(""), "");
  EXPECT_NE(run_id_problem("latest"), "");
  EXPECT_NE(run_id_problem("../up"), "");
  EXPECT_NE(run_id_problem("a/b"), "");
  EXPECT_NE(run_id_problem(".hidden"), "");
  EXPECT_NE(run_id_problem(std::string(64, 'a')), "");
}

TEST(CheckpointLayout, ResumeReasonsReadBackAsWritten) {
  for (ResumeReason r : {ResumeReason::kFresh, ResumeReason::kThisRun, ResumeReason::kResumeFrom})
    EXPECT_EQ(resume_reason_from_string(to_string(r)), r);
  EXPECT_EQ(resume_reason_from_string("Restart"), std::nullopt);
}

}  // namespace
}  // namespace torus::launch

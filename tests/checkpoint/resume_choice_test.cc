// Which checkpoint a run starts from: its own, else the one resumeFrom names, else none; never another run's
// silently.
#include "worker/checkpoint/resume_choice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "common/util/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace torus::worker::checkpoint {
namespace {

namespace fs = std::filesystem;
using launch::ResumeReason;
using testing::TempDir;

// A checkpoint of `run` at `step`, written `age_s` seconds ago (its folder's order for "latest").
std::string write_checkpoint(const std::string& dir, const std::string& run, int64_t step, int age_s,
                             const std::string& written_by = "") {
  CheckpointWriter w;
  const int64_t payload[1] = {step};
  w.add_section("params", payload, sizeof(payload));
  w.set_metadata({{"step", step}, {kRunMetadataKey, written_by.empty() ? run : written_by}});
  fs::create_directories(launch::run_checkpoint_dir(dir, run));
  const std::string path = launch::checkpoint_path(dir, run, step);
  w.commit(path);
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  return path;
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(ResumeChoice, ANewRunStartsFreshAndIsToldOfTheOthers) {
  TempDir tmp;
  write_checkpoint(tmp.str(), "old", 234, 100);
  write_checkpoint(tmp.str(), "older", 80, 200);
  const ResumeChoice c = choose_resume(tmp.str(), "new", "", 2);
  EXPECT_EQ(c.reason, ResumeReason::kFresh);
  EXPECT_FALSE(c.found);
  ASSERT_EQ(c.other_runs.size(), 2u);
  EXPECT_EQ(c.other_runs[0].run, "old") << "newest first";
  EXPECT_EQ(c.other_runs[0].newest_step, 234);
  EXPECT_EQ(c.other_runs[1].run, "older");
  EXPECT_FALSE(fs::exists(tmp.file("new"))) << "choosing makes no folder for the run";
}

TEST(ResumeChoice, ARunResumesItsOwnCheckpointFirst) {
  TempDir tmp;
  write_checkpoint(tmp.str(), "other", 500, 1);
  const std::string own = write_checkpoint(tmp.str(), "mine", 40, 100);
  for (const char* resume_from : {"", "latest", "other"}) {
    const ResumeChoice c = choose_resume(tmp.str(), "mine", resume_from, 2);
    EXPECT_EQ(c.reason, ResumeReason::kThisRun) << resume_from;
    ASSERT_TRUE(c.found);
    EXPECT_EQ(c.found->path, own);
    EXPECT_EQ(c.from_run, "mine");
  }
}

TEST(ResumeChoice, ResumeFromLatestTakesTheMostRecentlyWrittenOtherRun) {
  TempDir tmp;
  write_checkpoint(tmp.str(), "a", 900, 300);  // the highest step, but written first
  const std::string b = write_checkpoint(tmp.str(), "b", 20, 10);
  const ResumeChoice c = choose_resume(tmp.str(), "new", "latest", 2);
  EXPECT_EQ(c.reason, ResumeReason::kResumeFrom);
  ASSERT_TRUE(c.found);
  EXPECT_EQ(c.found->path, b);
  EXPECT_EQ(c.from_run, "b");
  const ResumeChoice named = choose_resume(tmp.str(), "new", "a", 2);
  ASSERT_TRUE(named.found);
  EXPECT_EQ(named.found->step, 900);
  EXPECT_EQ(named.from_run, "a");
}

TEST(ResumeChoice, CheckpointsWrittenBeforeRunsHadIdsAreTheUnnamedRun) {
  TempDir tmp;
  const std::string flat = write_checkpoint(tmp.str(), "", 12, 10);
  EXPECT_EQ(choose_resume(tmp.str(), "new", "", 2).other_runs.at(0).run, "");
  const ResumeChoice c = choose_resume(tmp.str(), "new", "latest", 2);
  ASSERT_TRUE(c.found);
  EXPECT_EQ(c.found->path, flat);
  // A worker without a run id is that unnamed run: it resumes them as its own.
  EXPECT_EQ(choose_resume(tmp.str(), "", "", 2).reason, ResumeReason::kThisRun);
}

TEST(ResumeChoice, AResumeFromThatNamesNothingIsRefusedNamingTheField) {
  TempDir tmp;
  EXPECT_NE(what_of([&] { choose_resume(tmp.str(), "new", "latest", 2); })
                .find("spec.training.checkpoint.resumeFrom: latest, but " + tmp.str() +
                      " holds no valid checkpoint of another run"),
            std::string::npos);
  write_checkpoint(tmp.str(), "a", 5, 1);
  const std::string missing = what_of([&] { choose_resume(tmp.str(), "new", "nope", 2); });
  EXPECT_NE(missing.find("spec.training.checkpoint.resumeFrom: no valid checkpoint of run nope"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("runs there: a"), std::string::npos) << missing;
  EXPECT_NE(what_of([&] { choose_resume(tmp.str(), "new", "new", 2); }).find("is this run"), std::string::npos);
}

TEST(ResumeChoice, AnotherRunsCheckpointInThisRunsFolderIsRefused) {
  TempDir tmp;
  const std::string moved = write_checkpoint(tmp.str(), "mine", 7, 1, /*written_by=*/"theirs");
  const std::string what = what_of([&] { choose_resume(tmp.str(), "mine", "", 2); });
  EXPECT_NE(what.find(moved + ": written by run theirs, found in run mine's folder"), std::string::npos) << what;
}

}  // namespace
}  // namespace torus::worker::checkpoint

// torus-worker's body: one rank of a small synthetic job run to its target, and the command line.
#include "worker/train/worker_main.h"

#include <gtest/gtest.h>

#include <string>

#include "common/util/error.h"
#include "tests/worker/synthetic_job.h"

namespace torus::worker::train {
namespace {

using testing::synthetic_job;

TEST(WorkerMain, RunsOneRankOfASyntheticJobToItsTarget) {
  const api::TrainingJob job = synthetic_job();
  LocalCollectives alone;
  const RunResult r = train_job(job, alone, nullptr, nullptr);
  EXPECT_TRUE(r.reached_target) << "top-1 " << r.last_eval.top1;
  EXPECT_EQ(r.last_eval.samples, 128);
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
}  // namespace torus::worker::train

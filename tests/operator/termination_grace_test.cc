// The worker pods' terminationGracePeriodSeconds (issue 31.4): derived from the job's measured step, save and
// evaluation times as a table; a user's value in the pod template wins; the pods an attempt is made with carry it.
#include "operator/controller/termination_grace.h"

#include <gtest/gtest.h>

#include <cmath>

#include "operator/controller/children.h"
#include "operator/controller/labels.h"

namespace torus::controller {
namespace {

struct Row {
  const char* why;
  GraceInputs in;
  int64_t want;
};

TEST(TerminationGrace, DerivedFromTheMeasuredStepSaveAndEvaluationAsATable) {
  const Row rows[] = {
      {"nothing measured: Kubernetes' default, said explicitly", {0, 0, 0}, kUnmeasuredGraceSeconds},
      {"a step but no save yet", {0.5, 0, 0}, kUnmeasuredGraceSeconds},
      {"a save but no step time", {0, 3, 0}, kUnmeasuredGraceSeconds},
      {"a corrupt figure counts as unmeasured", {std::nan(""), 3, 0}, kUnmeasuredGraceSeconds},
      {"tiny job: the floor", {0.02, 0.05, 0.1}, kGraceFloorSeconds},
      // 2 x (0 + 1 + 2 x 4) + 5 = 23
      {"step + two saves, doubled, plus slack", {1, 4, 0}, 23},
      // 2 x (6 + 1 + 2 x 4) + 5 = 35
      {"an evaluation pass in flight counts", {1, 4, 6}, 35},
      // 2 x (0 + 0.3 + 2 x 1.2) = 5.4 -> 6, + 5 = 11
      {"rounded up to whole seconds", {0.3, 1.2, 0}, 11},
      // 2 x (0 + 2 + 2 x 60) + 5 = 249: a large model on slow storage gets minutes, not Kubernetes' 30 s
      {"a slow store", {2, 60, 0}, 249},
      {"an absurd figure is capped at a day", {1, 1e12, 0}, 86400},
  };
  for (const Row& r : rows) EXPECT_EQ(derive_termination_grace(r.in), r.want) << r.why;
}

TEST(TerminationGrace, InputsComeFromTheStatusLedger) {
  api::TrainingJobStatus s;
  s.goodput.step_seconds = 0.25;
  s.goodput.slowest_checkpoint_seconds = 1.5;
  s.goodput.seconds.evaluation = 9;
  s.progress.epoch = 3;
  const GraceInputs in = grace_inputs(s);
  EXPECT_DOUBLE_EQ(in.step_seconds, 0.25);
  EXPECT_DOUBLE_EQ(in.save_seconds, 1.5);
  EXPECT_DOUBLE_EQ(in.evaluation_seconds, 3);  // one pass per completed epoch
  s.progress.epoch = 0;
  EXPECT_DOUBLE_EQ(grace_inputs(s).evaluation_seconds, 0) << "no epoch completed: no pass measured";
}

api::TrainingJob job_with_template(const nlohmann::json& pod_template) {
  api::TrainingJob job;
  job.metadata.name = "g";
  job.metadata.namespace_ = "ns";
  job.spec.gang.workers = 2;
  job.spec.gang.image = "torus-worker:dev";
  job.spec.gang.pod_template = pod_template;
  return job;
}

TEST(TerminationGrace, AnAttemptsPodsCarryTheGraceOfTheStatusThenOrTheUsersValue) {
  api::TrainingJob job = job_with_template(nlohmann::json::object());
  const json first = build_worker_pod(job, 1, 0, {});
  EXPECT_EQ(first["spec"]["terminationGracePeriodSeconds"], kUnmeasuredGraceSeconds);
  EXPECT_EQ(first["metadata"]["annotations"].value(std::string(kAnnotationTerminationGrace), ""), "unmeasured");
  job.status.goodput.step_seconds = 1;
  job.status.goodput.slowest_checkpoint_seconds = 4;
  const json pod = build_worker_pod(job, 1, 1, {});
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 23);
  EXPECT_EQ(pod["metadata"]["annotations"].value(std::string(kAnnotationTerminationGrace), ""),
            "step 1 s, save 4 s, evaluation 0 s");
  // The user's value is kept as written, shorter or longer than the derived one.
  for (int64_t user : {0, 7, 600}) {
    api::TrainingJob mine = job_with_template({{"spec", {{"terminationGracePeriodSeconds", user}}}});
    mine.status = job.status;
    EXPECT_EQ(user_termination_grace(mine), user);
    const json kept = build_worker_pod(mine, 0, 1, {});
    EXPECT_EQ(kept["spec"]["terminationGracePeriodSeconds"], user);
    EXPECT_EQ(kept["metadata"]["annotations"].value(std::string(kAnnotationTerminationGrace), ""),
              "spec.gang.template");
  }
  // Not an integer >= 0 (the API server refuses those anyway): not the user's, the derived one applies.
  api::TrainingJob odd = job_with_template({{"spec", {{"terminationGracePeriodSeconds", "soon"}}}});
  odd.status = job.status;
  EXPECT_FALSE(user_termination_grace(odd));
  EXPECT_EQ(build_worker_pod(odd, 0, 1, {})["spec"]["terminationGracePeriodSeconds"], 23);
}

}  // namespace
}  // namespace torus::controller

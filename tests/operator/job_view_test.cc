// The job as a pass reads it (view_job) and the per-job cache of it (JobViews).
#include "operator/controller/job_view.h"

#include <gtest/gtest.h>

#include "operator/controller/planner.h"
#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

TEST(ViewJob, DefaultsTheSpecAndFingerprintsItAsThePodsDo) {
  const json job = JobBuilder().workers(4).build();
  auto view = view_job(job);
  EXPECT_TRUE(view->errors.empty()) << (view->errors.empty() ? "" : view->errors.front().to_string());
  EXPECT_EQ(view->job.spec.gang.workers, 4);
  EXPECT_EQ(view->job.spec.run_policy.managed_by, defaulted(job).spec.run_policy.managed_by);
  EXPECT_FALSE(view->job.spec.run_policy.managed_by.empty());  // a default was applied
  EXPECT_EQ(view->spec_hash, spec_hash_of(job));
}

TEST(ViewJob, NamesTheFieldOfAnInvalidSpec) {
  json job = JobBuilder().build();
  job["spec"]["gang"]["workers"] = "three";
  auto view = view_job(job);
  ASSERT_FALSE(view->errors.empty());
  EXPECT_NE(view->errors.front().to_string().find("spec.gang.workers"), std::string::npos)
      << view->errors.front().to_string();
  job["spec"]["gang"]["workers"] = 0;  // well formed, refused by validation
  view = view_job(job);
  ASSERT_FALSE(view->errors.empty());
  EXPECT_NE(view->errors.front().to_string().find("spec.gang.workers"), std::string::npos)
      << view->errors.front().to_string();
}

TEST(ViewJob, IgnoresMetadataThatIsNotOurs) {
  const json job = JobBuilder().build();
  json noisy = job;
  noisy["metadata"]["managedFields"] = json::array({{{"manager", "kubectl"}, {"fieldsV1", {{"f:spec", 1}}}}});
  EXPECT_TRUE(view_job(noisy)->errors.empty());
  EXPECT_EQ(view_job(noisy)->spec_hash, view_job(job)->spec_hash);
}

TEST(JobViews, ReusesAViewWhileTheResourceVersionStays) {
  JobViews views;
  json job = JobBuilder().build();
  auto first = views.get("team/mnist", job);
  EXPECT_EQ(views.get("team/mnist", job), first);
  EXPECT_EQ(views.size(), 1u);

  job["spec"]["gang"]["workers"] = 4;  // an edit: the server gives it a new resourceVersion
  job["metadata"]["resourceVersion"] = "8";
  auto edited = views.get("team/mnist", job);
  EXPECT_NE(edited, first);
  EXPECT_EQ(edited->job.spec.gang.workers, 4);
  EXPECT_EQ(views.size(), 1u);  // the old view is replaced, not kept

  views.forget("team/mnist");
  EXPECT_EQ(views.size(), 0u);
  EXPECT_NE(views.get("team/mnist", job), edited);
}

TEST(JobViews, DoesNotKeepAJobWithoutResourceVersion) {
  JobViews views;
  json job = JobBuilder().build();
  job["metadata"].erase("resourceVersion");
  auto first = views.get("team/mnist", job);
  EXPECT_EQ(views.size(), 0u);
  EXPECT_NE(views.get("team/mnist", job), first);
}

// A pass given the cached view plans exactly what a pass that decodes the job itself plans.
TEST(JobViews, APlanFromTheViewEqualsAPlanFromTheJob) {
  const std::vector<PlanInput> inputs = {
      PlanInput{JobBuilder().build(), {}, {}, {}, {}, at(0), "s3cret"},
      PlanInput{JobBuilder().workers(2).phase("Running").build(),
                objects_of({PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).exited(137).build()}),
                {}, {}, {}, at(30), ""},
  };
  for (PlanInput in : inputs) {
    const Plan decoded_here = plan(in);
    in.view = view_job(in.job);
    const Plan from_view = plan(in);
    ASSERT_EQ(from_view.creates.size(), decoded_here.creates.size());
    for (size_t i = 0; i < from_view.creates.size(); ++i) {
      EXPECT_EQ(from_view.creates[i].object, decoded_here.creates[i].object);
    }
    EXPECT_EQ(from_view.deletes.size(), decoded_here.deletes.size());
    EXPECT_EQ(from_view.status, decoded_here.status);
    EXPECT_EQ(from_view.events.size(), decoded_here.events.size());
  }
}

}  // namespace
}  // namespace torus::controller

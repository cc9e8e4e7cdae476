// status.goodput from rank 0's /metrics: the ledger's series read back, and the attempts summed with the work each
// restart lost.
#include "operator/controller/goodput_status.h"

#include <gtest/gtest.h>

#include "common/api/codec.h"
#include "common/metrics/goodput_metrics.h"
#include "common/metrics/registry.h"
#include "common/metrics/worker_metrics.h"
#include "operator/controller/progress.h"

namespace torus::controller {
namespace {

using json = nlohmann::json;
using process::TimePart;

// Rank 0's exposition after `steps` steps of 0.1 s (0.08 training, 0.02 communication wait) in `attempt`.
std::string rank0_exposition(int attempt, int64_t global_step, int steps) {
  metrics::Registry registry;
  metrics::WorkerMetrics worker(registry, "j", "ns", 0, attempt);
  metrics::GoodputMetrics goodput(registry, "j", "ns", 0, attempt);
  goodput.add(TimePart::kStartup, 2);
  goodput.set_comm_init(0.5);
  for (int i = 0; i < steps; ++i) {
    worker.record_step({.step = 0.1, .data_wait = 0, .compute = 0.08, .comm_wait = 0.02}, 32);
    goodput.add(TimePart::kTraining, 0.08);
    goodput.add(TimePart::kCommWait, 0.02);
  }
  worker.global_step.set(static_cast<double>(global_step));
  worker.resumed_step.set(0);  // it has looked for its checkpoint (the tests pass the step it resumed from)
  return registry.expose();
}

TEST(GoodputStatus, TheStepASurvivorReachedRaisesItsAttemptsLastStepOnly) {
  api::Goodput g;
  g.attempt = 2;
  g.last_step = 40;
  EXPECT_EQ(with_step_reached(g, 2, 56).last_step, 56);
  EXPECT_EQ(with_step_reached(g, 2, 30).last_step, 40) << "a reading past it stays";
  EXPECT_EQ(with_step_reached(g, 3, 56).last_step, 40) << "no reading of attempt 3: nothing to add it to";
  // And the next attempt's loss counts from it: resumed at 50, 6 steps redone, not 0.
  GoodputReading next{.attempt = 3, .global_step = 50, .step_seconds = 0.1, .resume_known = true};
  g.step_seconds = 0.1;
  EXPECT_EQ(next_goodput(with_step_reached(g, 2, 56), next, 50, 10, "t").lost_steps, 6);
  EXPECT_EQ(next_goodput(g, next, 50, 10, "t").lost_steps, 0);
}

TEST(GoodputStatus, SchedulingRunsFromTheFirstCreationToTheLastContainerStart) {
  auto pod = [](const std::string& created, const std::string& state, const std::string& started) {
    json p = {{"metadata", {{"creationTimestamp", created}}}, {"status", json::object()}};
    if (!state.empty())
      p["status"]["containerStatuses"] = {{{"name", "worker"}, {"state", {{state, {{"startedAt", started}}}}}}};
    return p;
  };
  struct Case {
    std::vector<json> pods;
    double seconds;
  };
  const Case cases[] = {
      {{pod("2026-11-27T10:00:00Z", "running", "2026-11-27T10:00:04Z"),
        pod("2026-11-27T10:00:01Z", "running", "2026-11-27T10:00:09Z")},
       9},
      {{pod("2026-11-27T10:00:00Z", "terminated", "2026-11-27T10:00:03Z")}, 3},  // started, then ended
      {{pod("2026-11-27T10:00:00Z", "running", "2026-11-27T10:00:04Z"), pod("2026-11-27T10:00:01Z", "", "")},
       0},  // one not started: not yet
      {{}, 0},
  };
  for (const Case& c : cases) EXPECT_DOUBLE_EQ(scheduling_seconds(c.pods), c.seconds) << json(c.pods).dump();
}

TEST(GoodputStatus, RankZerosSeriesOfTheAttemptAreRead) {
  const auto samples = parse_prometheus_text(rank0_exposition(1, 70, 10));
  const auto r = goodput_from_metrics(samples, 1);
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(r->seconds.startup, 2);
  EXPECT_DOUBLE_EQ(r->seconds.comm_init, 0.5);
  EXPECT_NEAR(r->seconds.training, 0.8, 1e-9);
  EXPECT_NEAR(r->seconds.comm_wait, 0.2, 1e-9);
  EXPECT_EQ(r->global_step, 70);
  EXPECT_NEAR(r->step_seconds, 0.1, 1e-9);
  EXPECT_FALSE(goodput_from_metrics(samples, 0)) << "attempt 0's series are not attempt 1's";
}

// Attempt 0 is last read at step 50; attempt 1 resumed from the checkpoint of step 40: 10 steps of 0.1 s were lost,
// and attempt 0's training keeps only what its kept steps did.
TEST(GoodputStatus, ANewAttemptAddsToTheEarlierOnesAndCountsWhatTheRestartLost) {
  api::Goodput g;
  g = next_goodput(g, *goodput_from_metrics(parse_prometheus_text(rank0_exposition(0, 50, 50)), 0), 0, 10, "t1");
  EXPECT_EQ(g.last_step, 50);
  EXPECT_NEAR(g.seconds.training, 4, 1e-9);
  EXPECT_NEAR(g.ratio, 0.4, 1e-9);
  g = next_goodput(g, *goodput_from_metrics(parse_prometheus_text(rank0_exposition(1, 60, 20)), 1), 40, 20, "t2");
  EXPECT_EQ(g.attempt, 1);
  EXPECT_EQ(g.lost_steps, 10);
  EXPECT_NEAR(g.lost_work_seconds, 1.0, 1e-9);
  EXPECT_NEAR(g.earlier_attempts.training, 4 * (1 - 1.0 / 5), 1e-9);  // 1 s lost of 5 s of steps
  EXPECT_NEAR(g.seconds.training, 3.2 + 1.6, 1e-9);
  EXPECT_NEAR(g.seconds.startup, 4, 1e-9);
  EXPECT_NEAR(g.ratio, 4.8 / 20, 1e-9);
  // Later readings of the same attempt replace its figures; the restart is counted once.
  g = next_goodput(g, *goodput_from_metrics(parse_prometheus_text(rank0_exposition(1, 80, 40)), 1), 40, 22, "t3");
  EXPECT_EQ(g.lost_steps, 10);
  EXPECT_NEAR(g.seconds.training, 3.2 + 3.2, 1e-9);
  // What the controller writes is what the schema's codec reads back.
  api::TrainingJobStatus status;
  status.goodput = g;
  const auto back = api::decode_json({{"status", api::status_to_json(status)}}).job.status.goodput;
  EXPECT_EQ(back, g);
}

// A new attempt read before its rank 0 looked for its checkpoint (torus_worker_resumed_step still -1): the status
// waits for a reading that knows the resumed step, instead of counting the whole previous attempt as lost.
TEST(GoodputStatus, ANewAttemptReadBeforeItsRestoreWaitsToCountTheLoss) {
  api::Goodput g;
  g = next_goodput(g, *goodput_from_metrics(parse_prometheus_text(rank0_exposition(0, 67, 67)), 0), 0, 10, "t1");
  metrics::Registry registry;
  metrics::WorkerMetrics worker(registry, "j", "ns", 0, 1);
  metrics::GoodputMetrics goodput(registry, "j", "ns", 0, 1);
  goodput.add(TimePart::kStartup, 0.5);
  const auto early = goodput_from_metrics(parse_prometheus_text(registry.expose()), 1);
  ASSERT_TRUE(early);
  EXPECT_FALSE(early->resume_known);
  EXPECT_EQ(next_goodput(g, *early, 0, 11, "t2"), g) << "nothing changes yet";
  worker.resumed_step.set(89);
  const auto restored = goodput_from_metrics(parse_prometheus_text(registry.expose()), 1);
  ASSERT_TRUE(restored && restored->resume_known);
  g = next_goodput(g, *restored, 89, 12, "t3");
  EXPECT_EQ(g.attempt, 1);
  EXPECT_EQ(g.lost_steps, 0) << "resumed past the last step read: nothing redone";
}

// The slowest save, bounded from above by the histogram's buckets (which double) or by the sum of the saves.
TEST(GoodputStatus, TheSlowestSaveIsReadAsAnUpperBoundAndOnlyGrows) {
  auto slowest = [](std::initializer_list<double> saves, int attempt = 1) {
    metrics::Registry registry;
    metrics::WorkerMetrics worker(registry, "j", "ns", 0, attempt);
    for (double s : saves) worker.checkpoint_seconds.observe(s);
    return slowest_checkpoint_from_metrics(parse_prometheus_text(registry.expose()), 1);
  };
  EXPECT_DOUBLE_EQ(slowest({}), 0) << "no save yet";
  EXPECT_NEAR(slowest({0.3}), 0.3, 1e-9) << "one save: its sum is exact";
  EXPECT_NEAR(slowest({0.3, 0.05, 0.2}), 0.32, 1e-9) << "the bucket that holds every save";
  EXPECT_NEAR(slowest({100, 0.1}), 100.1, 1e-9) << "past the last bucket: the sum bounds it";
  EXPECT_DOUBLE_EQ(slowest({0.3}, 0), 0) << "another attempt's series";
  // status.goodput keeps the worst one seen: a later attempt's faster saves do not shorten the grace.
  api::Goodput g;
  g = next_goodput(g, GoodputReading{.attempt = 0, .slowest_checkpoint_seconds = 2.5}, 0, 10, "t1");
  g = next_goodput(g, GoodputReading{.attempt = 1, .slowest_checkpoint_seconds = 0.4}, 0, 20, "t2");
  EXPECT_DOUBLE_EQ(g.slowest_checkpoint_seconds, 2.5);
}

}  // namespace
}  // namespace torus::controller

// The Straggler condition from each rank's /metrics: a rank's arrival figures read back from a worker's exposition,
// the condition's transitions as a table (lastTransitionTime moves only when its status does, events only on news),
// and the per-job watches fed by reads.
#include "operator/controller/straggler_status.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/metrics/goodput_metrics.h"
#include "common/metrics/registry.h"
#include "common/metrics/worker_metrics.h"
#include "operator/controller/progress.h"

namespace torus::controller {
namespace {

using api::ConditionStatus;
using process::Straggler;
using process::StragglerWindow;
using process::TimePart;

// A rank's exposition after `steps` steps of `own_s` training and `data_wait_s` data wait each, in `attempt`.
std::string rank_exposition(int rank, int attempt, int steps, double own_s, double data_wait_s) {
  metrics::Registry registry;
  metrics::WorkerMetrics worker(registry, "j", "ns", rank, attempt);
  metrics::GoodputMetrics goodput(registry, "j", "ns", rank, attempt);
  for (int i = 0; i < steps; ++i) {
    worker.record_step({.step = own_s + data_wait_s + 0.01, .data_wait = data_wait_s, .compute = own_s}, 32);
    goodput.add(TimePart::kTraining, own_s);
    goodput.add(TimePart::kDataWait, data_wait_s);
    goodput.add(TimePart::kCommWait, 0.01);  // waiting for the others is not arriving late
  }
  return registry.expose();
}

TEST(StragglerStatus, ARanksArrivalIsItsStepsAndItsDataWaitPlusTraining) {
  const auto samples = parse_prometheus_text(rank_exposition(1, 2, 40, 0.02, 0.005));
  const auto a = rank_arrival_from_metrics(samples, 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->steps, 40);
  EXPECT_NEAR(a->offset_s, 40 * 0.025, 1e-9);
  EXPECT_FALSE(rank_arrival_from_metrics(samples, 3)) << "another attempt's series are not this attempt's";
  EXPECT_FALSE(rank_arrival_from_metrics(parse_prometheus_text(""), 0));
}

StragglerWindow window(int rank, double slowdown, bool straggling) {
  return {Straggler{rank, slowdown, 0.01 * slowdown, 0.01}, straggling, 1.25};
}

// One window after another, each row the verdict and what the job's Straggler condition and events are then.
struct Row {
  const char* what;
  StragglerWindow verdict;
  const char* time;                    // the pass's clock
  std::optional<ConditionStatus> now;  // the condition after the row; nullopt: none
  const char* transition_time;         // its lastTransitionTime
  const char* event;                   // the event's reason, "" for none
  const char* message_has;             // in the condition's message
};

TEST(StragglerStatus, TheConditionTurnsTrueWhileARankArrivesLateAndFalseWhenItRecovers) {
  const RankPlace place{"j-worker-1", "sim-node2"};
  const std::vector<Row> rows = {
      {"an even gang: no condition", window(1, 1.05, false), "t1", std::nullopt, "", "", ""},
      {"rank 1 late: named", window(1, 1.8, true), "t2", ConditionStatus::kTrue, "t2", "Straggler",
       "rank 1 (pod j-worker-1, node sim-node2) arrives at the all-reduce after 1.80x the gang's median own work per "
       "step (18.0 vs 10.0 ms)"},
      {"still late: updated, no news", window(1, 2.1, true), "t3", ConditionStatus::kTrue, "t2", "", "2.10x"},
      {"recovered", window(1, 1.1, false), "t4", ConditionStatus::kFalse, "t4", "StragglerRecovered",
       "no rank arrives at the all-reduce 1.25x the gang's median or later; the slowest, rank 1"},
      {"still even: unchanged", window(0, 1.02, false), "t5", ConditionStatus::kFalse, "t4", "", "rank 1"},
      {"rank 0 late", window(0, 1.5, true), "t6", ConditionStatus::kTrue, "t6", "Straggler", "rank 0 (pod j-worker-1"},
      {"another rank: news", window(1, 1.5, true), "t7", ConditionStatus::kTrue, "t6", "Straggler", "rank 1 (pod"},
  };
  api::TrainingJobStatus status;
  for (const Row& r : rows) {
    SCOPED_TRACE(r.what);
    const StragglerUpdate u = apply_straggler_window(status, r.verdict, place, 3, r.time);
    const api::Condition* c = api::find_condition(status, kStragglerCondition);
    ASSERT_EQ(c != nullptr, r.now.has_value());
    EXPECT_EQ(u.event ? u.event->reason : "", r.event);
    if (!c) continue;
    EXPECT_EQ(c->status, *r.now);
    EXPECT_EQ(c->last_transition_time, r.transition_time);
    EXPECT_EQ(c->observed_generation, 3);
    EXPECT_NE(c->message.find(r.message_has), std::string::npos) << c->message;
    if (u.event) {
      EXPECT_EQ(u.event->message, c->message) << "the event says what the condition says";
      EXPECT_EQ(u.event->type, c->status == ConditionStatus::kTrue ? EventType::kWarning : EventType::kNormal);
    }
  }
}

TEST(StragglerStatus, AReadClosesAWindowOfTheJobsAttempt) {
  StragglerWatches watches;
  EXPECT_FALSE(watches.feed("ns/j", 0, 2, {{0, {0, 0}}, {1, {0, 0}}}));
  EXPECT_FALSE(watches.feed("ns/j", 0, 2, {{0, {30, 0.3}}, {1, {30, 0.6}}})) << "under 50 steps";
  auto w = watches.feed("ns/j", 0, 2, {{0, {60, 0.6}}, {1, {60, 1.2}}});
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->straggling);
  EXPECT_EQ(w->slowest.rank, 1);
  EXPECT_NEAR(w->slowest.slowdown, 2, 1e-9);
  // A new attempt starts new windows: its first read is their start, whatever the old attempt's counts were.
  EXPECT_FALSE(watches.feed("ns/j", 1, 2, {{0, {5, 0.05}}, {1, {5, 0.05}}}));
  w = watches.feed("ns/j", 1, 2, {{0, {60, 0.6}}, {1, {60, 0.6}}});
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->straggling);
  watches.forget("ns/j");
  EXPECT_FALSE(watches.feed("ns/j", 1, 2, {{0, {200, 2}}, {1, {200, 4}}})) << "forgotten: a new start";
  EXPECT_FALSE(watches.feed("ns/j", 1, 1, {{0, {900, 9}}})) << "a gang of one has no straggler";
}

}  // namespace
}  // namespace torus::controller

// A straggler named from the ranks' arrival offsets (data wait + own work per step) over a window of steps.
#include "common/process/straggler.h"

#include <gtest/gtest.h>

#include "common/process/goodput.h"
#include "operator/runtime/run_report.h"

namespace torus::runtime {
namespace {

using process::TimePart;

// A progress event of a rank whose own work took `per_step` seconds in each of `steps` steps.
process::ProgressEvent progress(int64_t steps, double per_step) {
  process::RankLedger l;
  l.steps = steps;
  l[TimePart::kTraining] = per_step * static_cast<double>(steps);
  return {.step = steps, .ledger = l};
}

TEST(StragglerWatch, TheRankThatArrivesLateOverAWindowIsNamed) {
  StragglerWatch watch(3, /*window_steps=*/50, /*threshold=*/1.25);
  for (int r = 0; r < 3; ++r) EXPECT_FALSE(watch.on_event(r, progress(10, r == 2 ? 0.018 : 0.01)));
  EXPECT_FALSE(watch.on_event(0, progress(60, 0.01)));
  EXPECT_FALSE(watch.on_event(1, progress(60, 0.01)));
  const auto s = watch.on_event(2, progress(60, 0.018));  // the window closes: every rank is 50 steps on
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 2);
  EXPECT_NEAR(s->slowdown, 1.8, 1e-9);
  EXPECT_NEAR(s->arrival_s, 0.018, 1e-12);
  EXPECT_NEAR(s->median_s, 0.01, 1e-12);
  EXPECT_EQ(watch.worst()->rank, 2);
  // The next window says the same: not said again.
  watch.on_event(0, progress(110, 0.01));
  watch.on_event(1, progress(110, 0.01));
  EXPECT_FALSE(watch.on_event(2, progress(110, 0.018)));
}

TEST(StragglerWatch, AnEvenGangHasNone) {
  StragglerWatch watch(2, 50, 1.25);
  for (int r = 0; r < 2; ++r) watch.on_event(r, progress(1, 0.01));
  EXPECT_FALSE(watch.on_event(0, progress(100, 0.011)));
  EXPECT_FALSE(watch.on_event(1, progress(100, 0.012)));  // 1.09x: within the margin
  EXPECT_FALSE(watch.worst());
}

// The operator reads every closed window's verdict from cumulative samples: the slowest rank even under the margin
// (its metric), and whether it is past it (its condition), so a recovered rank shows as no longer straggling.
TEST(StragglerWatch, EveryClosedWindowSaysItsSlowestRankAndWhetherItStraggles) {
  StragglerWatch watch(2, 50, 1.25);
  EXPECT_FALSE(watch.on_sample(0, 0, 0));
  EXPECT_FALSE(watch.on_sample(1, 0, 0));
  EXPECT_FALSE(watch.on_sample(0, 100, 1.0));  // rank 1 has not reported the window's steps yet
  auto w = watch.on_sample(1, 100, 2.0);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->straggling);
  EXPECT_EQ(w->slowest.rank, 1);
  EXPECT_NEAR(w->slowest.slowdown, 2.0, 1e-9);
  // Recovered: 1.1x is the slowest of the next window, but under the margin.
  EXPECT_FALSE(watch.on_sample(0, 200, 2.0));
  w = watch.on_sample(1, 200, 3.1);
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->straggling);
  EXPECT_EQ(w->slowest.rank, 1);
  EXPECT_NEAR(w->slowest.slowdown, 1.1, 1e-9);
  EXPECT_EQ(watch.worst()->rank, 1);
  EXPECT_FALSE(StragglerWatch(1).on_sample(0, 100, 1.0));  // a gang of one has no straggler
}

TEST(StragglerWatch, TheSummaryNamesIt) {
  RunReport r;
  r.on_event(0, process::StartedEvent{.rank = 0, .world_size = 2});
  r.on_event(1, process::StartedEvent{.rank = 1, .world_size = 2});
  r.on_event(0, progress(1, 0.01));
  r.on_event(1, progress(1, 0.02));
  EXPECT_FALSE(r.on_event(0, progress(80, 0.01)));
  const auto s = r.on_event(1, progress(80, 0.02));
  ASSERT_TRUE(s);
  EXPECT_EQ(straggler_line(*s),
            "straggler: rank 1 arrives at the all-reduce after 2.00x the gang's median own work per step (20.0 vs 10.0 "
            "ms)");
  const auto lines = r.summary({api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 1);
  EXPECT_NE(lines.back().find(" straggler_rank=1 straggler_slowdown=2.00"), std::string::npos) << lines.back();
}

}  // namespace
}  // namespace torus::runtime

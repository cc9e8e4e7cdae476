// The job's communication knobs (CommRunOptions) -> the comm layer's options, with the developer tunables beside
// them; and the plan rank 0 logs: the algorithm each bucket size runs with, and why.
#include "worker/app/comm_plan.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace torus::worker::app {
namespace {

using std::chrono::milliseconds;

// 8 hosts of one rank each: hierarchical (host-local first) does not apply.
comm::Planner eight_hosts() {
  comm::Topology spread;
  for (int r = 0; r < 8; ++r) spread.ranks.push_back({r, r, 0, "h" + std::to_string(r), ""});
  return comm::Planner(spread, comm::CostModel{}, comm::torus_grid(8, 0), true);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommPlan, WorldOptionsTakeTheJobsKnobsAndTheTunablesTheRest) {
  CommRunOptions c;
  c.algorithm = api::AllReduceAlgorithm::kTorus2d;
  c.grid_x = 4;
  c.timeout = milliseconds(5000);
  const comm::WorldOptions o =
      world_options(c, tunables::Snapshot::of({{"TORUS_SHM", "0"}, {"TORUS_SHM_SLOT_BYTES", "65536"}}));
  EXPECT_EQ(o.algorithm, api::AllReduceAlgorithm::kTorus2d);
  EXPECT_EQ(o.torus_x, 4);
  EXPECT_EQ(o.timeout, milliseconds(5000));
  EXPECT_FALSE(o.shared_memory);
  EXPECT_EQ(o.shm_slot_bytes, 65536u);
  EXPECT_TRUE(world_options(c, tunables::Snapshot{}).shared_memory) << "shared memory unless a tunable says no";
}

TEST(CommPlan, ReducerOptionsCarryTheBucketSizesAndTheCompression) {
  CommRunOptions c;
  c.first_bucket_bytes = 256 << 10;
  c.bucket_cap_bytes = 4 << 20;
  c.compression = api::Compression::kBf16;
  const comm::ReducerOptions r = reducer_options(c);
  EXPECT_EQ(r.buckets.first_bucket_bytes, size_t{256} << 10);
  EXPECT_EQ(r.buckets.bucket_cap_bytes, size_t{4} << 20);
  EXPECT_EQ(r.compression, api::Compression::kBf16);
}

TEST(CommPlan, AnAlgorithmTheJobNamesIsReportedAsItsChoiceWithTheBytesOnTheWire) {
  CommRunOptions c;  // buckets of 1 MiB, then 25 MiB of fp32 gradients
  c.algorithm = api::AllReduceAlgorithm::kRing;
  c.compression = api::Compression::kFp16;
  const std::vector<std::string> plan = describe_plan(eight_hosts(), c);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0],
            "all-reduce of the first bucket (up to 524288 bytes on the wire): ring (spec.allReduce.algorithm)");
  EXPECT_EQ(plan[1],
            "all-reduce of the other buckets (up to 13107200 bytes on the wire): ring (spec.allReduce.algorithm)");
}

TEST(CommPlan, AutoReportsTheCostModelsChoiceAndEveryPrediction) {
  const comm::Planner planner = eight_hosts();
  CommRunOptions c;
  c.first_bucket_bytes = 4 << 10;
  const std::vector<std::string> plan = describe_plan(planner, c);
  ASSERT_EQ(plan.size(), 2u);
  const std::string chosen(api::to_string(planner.choose(4 << 10)));
  EXPECT_TRUE(contains(plan[0], "(up to 4096 bytes on the wire): " + chosen + " (auto: the cost model's cheapest;"))
      << plan[0];
  EXPECT_TRUE(contains(plan[0], "hierarchical n/a")) << "not applicable on one rank per host: " << plan[0];
  for (const char* algorithm : {"ring ", "torus2d "})
    EXPECT_TRUE(contains(plan[0], algorithm)) << algorithm << " missing from " << plan[0];
  EXPECT_TRUE(contains(plan[0], " ms")) << plan[0];
}

TEST(CommPlan, TheMainAlgorithmIsTheJobsOrTheCostModelsForTheLargeBuckets) {
  const comm::Planner planner = eight_hosts();
  CommRunOptions c;
  c.algorithm = api::AllReduceAlgorithm::kTorus2d;
  EXPECT_EQ(main_algorithm(planner, c), api::AllReduceAlgorithm::kTorus2d);
  c.algorithm = api::AllReduceAlgorithm::kAuto;
  EXPECT_EQ(main_algorithm(planner, c), planner.choose(c.bucket_cap_bytes));
  c.compression = api::Compression::kBf16;
  EXPECT_EQ(main_algorithm(planner, c), planner.choose(c.bucket_cap_bytes / 2)) << "bytes on the wire";
}

}  // namespace
}  // namespace torus::worker::app

// worker/comm/nccl/bucket_placement.h on the CPU: what the NCCL gradient path places on its stream for one bucket.
// The order is the metric's meaning: a timed bucket's start event must follow both the wait for the backward and
// the arrival gate, or the all-reduce's device time (and the bus bandwidth computed from it) counts waiting.
#include "worker/comm/nccl/bucket_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace torus::comm {
namespace {

using P = Placement;

ptrdiff_t position(const std::vector<Placement>& steps, Placement p) {
  const auto it = std::find(steps.begin(), steps.end(), p);
  return it == steps.end() ? -1 : it - steps.begin();
}

TEST(BucketPlacement, ATimedBucketStartsItsClockAfterTheBackwardAndEveryPeerArrived) {
  const std::vector<Placement> steps = bucket_placements(ProducerWait::kWait, BucketTiming::kFromArrival);
  EXPECT_EQ(steps, (std::vector<Placement>{P::kWaitForProducer, P::kArrivalGate, P::kStartEvent, P::kReduction,
                                           P::kFinishEvent}));
  EXPECT_LT(position(steps, P::kWaitForProducer), position(steps, P::kStartEvent));
  EXPECT_LT(position(steps, P::kArrivalGate), position(steps, P::kStartEvent));
  EXPECT_EQ(position(steps, P::kStartEvent) + 1, position(steps, P::kReduction)) << "nothing else inside the clock";
  EXPECT_EQ(position(steps, P::kReduction) + 1, position(steps, P::kFinishEvent));
}

TEST(BucketPlacement, ATimedBucketWithoutAProducerStillWaitsForItsPeers) {
  EXPECT_EQ(bucket_placements(ProducerWait::kNone, BucketTiming::kFromArrival),
            (std::vector<Placement>{P::kArrivalGate, P::kStartEvent, P::kReduction, P::kFinishEvent}));
}

// Untimed buckets pay for no gate: only the reduction (after the backward where there is one).
TEST(BucketPlacement, AnUntimedBucketIsTheReductionAlone) {
  EXPECT_EQ(bucket_placements(ProducerWait::kWait, BucketTiming::kOff),
            (std::vector<Placement>{P::kWaitForProducer, P::kReduction}));
  EXPECT_EQ(bucket_placements(ProducerWait::kNone, BucketTiming::kOff), std::vector<Placement>{P::kReduction});
}

}  // namespace
}  // namespace torus::comm

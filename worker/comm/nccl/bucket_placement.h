#pragma once
// What NcclCommunicator::enqueue_all_reduce_average places on the communication stream for one gradient bucket, in
// order, as a pure function (no CUDA include: tests/comm runs it on the CPU; the communicator executes exactly this
// list).
//
// Why an arrival gate. The bucket's device time feeds the all-reduce metrics (algorithm nccl, level global), from
// which the dashboards compute bus bandwidth (nccl-tests' algBw * 2(n-1)/n): a figure about the transfer. An NCCL
// kernel starts on this rank as soon as its stream reaches it and then waits, on the device, for the slowest peer
// to arrive at the same collective (a straggler's backward, a host that enqueued late). Events around the reduction
// alone therefore time that wait too, and bus bandwidth read low by however late the last rank was. No rank can see
// when its peers arrive, but a collective cannot finish anywhere before every rank has joined it: a one-element
// all-reduce placed before the start event finishes on this rank only after the last rank arrived (give or take one
// small-message latency), so the events bracket the transfer itself, as nccl-tests times it after lining the ranks
// up. The price: one small-message latency (microseconds) per bucket on the communication stream, paid only when the
// bucket is timed. Every rank must time alike, or their collectives would differ and hang.
#include <cstdint>
#include <vector>

namespace torus::comm {

enum class Placement : uint8_t {
  kWaitForProducer,  // the stream waits (an event) for what the producer stream (the backward) has queued so far
  kArrivalGate,      // one-element all-reduce: on this rank it finishes once every rank has reached this bucket
  kStartEvent,       // Timing::started
  kReduction,        // the bucket's ncclAllReduce (ncclAvg)
  kFinishEvent,      // Timing::finished
};

// Whether the bucket waits for a producer stream first (enqueue_all_reduce_average's `after` is given).
enum class ProducerWait : uint8_t { kNone, kWait };
// Whether the bucket is timed (enqueue_all_reduce_average's `timing` is given).
enum class BucketTiming : uint8_t { kOff, kFromArrival };

// The start event follows both waits (the producer's and the peers'): the time it opens is the transfer's alone.
inline std::vector<Placement> bucket_placements(ProducerWait wait, BucketTiming timing) {
  std::vector<Placement> steps;
  if (wait == ProducerWait::kWait) steps.push_back(Placement::kWaitForProducer);
  if (timing == BucketTiming::kFromArrival) {
    steps.insert(steps.end(),
                 {Placement::kArrivalGate, Placement::kStartEvent, Placement::kReduction, Placement::kFinishEvent});
  } else {
    steps.push_back(Placement::kReduction);
  }
  return steps;
}

}  // namespace torus::comm

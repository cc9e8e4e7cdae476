#include "worker/comm/nccl/nccl_gradient_sync.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cuda/errors.h"

namespace torus::comm {
namespace {

// The device time of a finished step's reductions: the sum over its buckets, each from when every rank had arrived
// at it to its end (gaps while backward still produced gradients, or while a peer was still on its way, are not
// transfer). A bucket without a valid interval (count 0, never enqueued) adds nothing.
double device_seconds(const std::vector<NcclCommunicator::Timing>& timing) {
  double seconds = 0;
  for (const NcclCommunicator::Timing& t : timing) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, t.started, t.finished) == cudaSuccess) {
      seconds += ms / 1000.0;
    } else {
      (void)cudaGetLastError();  // an event never recorded (an empty bucket) is not an error to keep
    }
  }
  return seconds;
}

}  // namespace

NcclGradientSync::NcclGradientSync(std::unique_ptr<NcclCommunicator> comm, cudaStream_t compute, float* arena,
                                   size_t arena_elements, std::vector<ParamSpan> params, const BucketOptions& buckets,
                                   std::shared_ptr<TrafficCounter> traffic, GraphCapture capture)
    : comm_(std::move(comm)),
      compute_(compute),
      arena_(arena),
      schedule_(params, arena_elements, buckets),
      traffic_(std::move(traffic)),
      capture_(capture) {
  for (const Bucket& b : schedule_.buckets()) step_bytes_ += (b.end - b.begin) * sizeof(float);
  if (traffic_) create_timing_events();
  if (capture_ == GraphCapture::kOn) {
    for (size_t i = 0; i < kStepsInFlight + 1; ++i)
      replay_events_.push_back(worker::cuda::make_event(worker::cuda::EventTiming::kOff));
  }
}

bool NcclGradientSync::capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(compute_, &status));
  if (status != cudaStreamCaptureStatusNone && capture_ == GraphCapture::kOff)
    throw InvalidArgument(
        "NCCL gradient sync: the step is being captured, but this sync was made without "
        "GraphCapture::kOn");
  return status == cudaStreamCaptureStatusActive;
}

void NcclGradientSync::create_timing_events() {
  timing_.resize(kStepsInFlight + 1);
  for (auto& slot : timing_) {
    slot.resize(schedule_.buckets().size());
    for (NcclCommunicator::Timing& t : slot) {
      t.started = timing_events_.emplace_back(worker::cuda::make_event(worker::cuda::EventTiming::kOn)).get();
      t.finished = timing_events_.emplace_back(worker::cuda::make_event(worker::cuda::EventTiming::kOn)).get();
    }
  }
}

NcclGradientSync::~NcclGradientSync() {
  // Watches reference the communicator; the arena must not be freed under running reductions. Errors were or will
  // never be observed here, and a destructor does not throw.
  for (const Work& w : watches_) {
    try {
      w.wait(comm_->timeout() * 2);
    } catch (...) {
    }
  }
}

void NcclGradientSync::begin_step() {
  // Before a capture, every watch of an eager step has ended: a watch records on the communicator's stream, which
  // the capture is about to join (what it recorded there would land in the graph).
  reap(capture_ == GraphCapture::kOn && capturing() ? 0 : kStepsInFlight);
  schedule_.begin_step();
}

void NcclGradientSync::grad_ready(size_t param_index) { launch(schedule_.mark_ready(param_index)); }

void NcclGradientSync::launch(BucketSchedule::Range range) {
  if (range.begin == range.end) return;
  // Inside a capture nothing is timed (and so no arrival gate): every rank captures the same step, so all agree.
  const bool timed = !timing_.empty() && !capturing();
  for (size_t index = range.begin; index < range.end; ++index) {
    const Bucket& b = schedule_.buckets()[index];
    const NcclCommunicator::Timing* timing = timed ? &timing_[slot_][index] : nullptr;
    comm_->enqueue_all_reduce_average(BufferView{arena_ + b.begin, b.end - b.begin, DType::kF32}, compute_, timing);
  }
}

void NcclGradientSync::finish_step() {
  launch(schedule_.finish());
  comm_->order_before(compute_);  // inside a capture: joins the forked stream back into the capturing one
  if (capturing()) return;        // replayed() watches each replay
  NcclCommunicator* comm = comm_.get();
  std::vector<NcclCommunicator::Timing> timing =
      timing_.empty() ? std::vector<NcclCommunicator::Timing>{} : timing_[slot_];
  watches_.push_back(
      comm_->submit("gradient_all_reduce", step_bytes_, [comm, timing, traffic = traffic_, bytes = step_bytes_] {
        comm->wait_enqueued("gradient all_reduce (bucketed, ncclAvg)");  // binds the rank's device on this thread
        if (traffic) traffic->add(timing.size(), bytes, device_seconds(timing));
      }));
  if (!timing_.empty()) slot_ = (slot_ + 1) % timing_.size();
  reap(kStepsInFlight);
}

void NcclGradientSync::replayed() {
  if (capture_ != GraphCapture::kOn) throw std::logic_error("NCCL gradient sync: replayed() without GraphCapture::kOn");
  reap(kStepsInFlight);
  cudaEvent_t done = replay_events_[replay_slot_].get();
  replay_slot_ = (replay_slot_ + 1) % replay_events_.size();  // reused only after its watch ended (reap above)
  CUDA_CHECK(cudaEventRecord(done, compute_));
  NcclCommunicator* comm = comm_.get();
  watches_.push_back(comm_->submit("gradient_all_reduce", step_bytes_, [comm, done] {
    comm->wait_event(done, "gradient all_reduce (bucketed, ncclAvg) of a replayed step");
  }));
}

void NcclGradientSync::drain() { reap(0); }

void NcclGradientSync::reap(size_t keep) {
  while (!watches_.empty()) {
    const Work front = watches_.front();
    if (!front.completed() && watches_.size() <= keep) break;
    watches_.pop_front();
    front.wait(comm_->timeout() * 2);  // rethrows the step's failure (timeout, NCCL error, aborted communicator)
  }
}

}  // namespace torus::comm

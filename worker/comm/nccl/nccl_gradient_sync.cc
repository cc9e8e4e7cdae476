#include "worker/comm/nccl/nccl_gradient_sync.h"

#include <string>

#include "common/util/error.h"

namespace torus::comm {

NcclGradientSync::NcclGradientSync(std::unique_ptr<NcclCommunicator> comm, cudaStream_t compute, float* arena,
                                   size_t arena_elements, std::vector<ParamSpan> params, const BucketOptions& buckets)
    : comm_(std::move(comm)), compute_(compute), arena_(arena), params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].offset + params_[i].count > arena_elements)
      throw InvalidArgument("gradient arena: parameter " + std::to_string(i) + " ends at " +
                            std::to_string(params_[i].offset + params_[i].count) + " but the arena has " +
                            std::to_string(arena_elements) + " elements");
  buckets_ = assign_buckets(params_, sizeof(float), buckets);
  bucket_of_param_.resize(params_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t p : buckets_[b].params) bucket_of_param_[p] = b;
    step_bytes_ += (buckets_[b].end - buckets_[b].begin) * sizeof(float);
  }
  begin_step();
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
  reap(kStepsInFlight);
  pending_.assign(buckets_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  ready_.assign(params_.size(), false);
  next_launch_ = 0;
}

void NcclGradientSync::grad_ready(size_t param_index) {
  if (param_index >= params_.size())
    throw InvalidArgument("grad_ready: parameter index " + std::to_string(param_index) + " out of range (" +
                          std::to_string(params_.size()) + " parameters)");
  if (ready_[param_index]) return;
  ready_[param_index] = true;
  --pending_[bucket_of_param_[param_index]];
  launch_ready();
}

void NcclGradientSync::launch_ready() {
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) {
    const Bucket& b = buckets_[next_launch_++];
    comm_->enqueue_all_reduce_average(Buffer{arena_ + b.begin, b.end - b.begin, DataType::kFloat32}, compute_);
  }
}

void NcclGradientSync::finish_step() {
  // Parameters that got no gradient this step keep the arena's values (like the CPU reducer): launch the rest.
  for (size_t b = next_launch_; b < buckets_.size(); ++b) pending_[b] = 0;
  launch_ready();
  comm_->order_before(compute_);
  NcclCommunicator* comm = comm_.get();
  watches_.push_back(comm_->submit("gradient_all_reduce", step_bytes_,
                                   [comm] { comm->wait_enqueued("gradient all_reduce (bucketed, ncclAvg)"); }));
  reap(kStepsInFlight);
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

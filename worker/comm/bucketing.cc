#include "worker/comm/bucketing.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "common/util/error.h"

namespace torus::comm {

std::vector<Bucket> assign_buckets(std::span<const ParamSpan> params, size_t element_bytes,
                                   const BucketOptions& options) {
  for (size_t i = 1; i < params.size(); ++i)
    if (params[i].offset < params[i - 1].offset + params[i - 1].count)
      throw InvalidArgument("gradient arena: parameter " + std::to_string(i) + " at offset " +
                            std::to_string(params[i].offset) + " overlaps or precedes parameter " +
                            std::to_string(i - 1) + " (expected ascending, non-overlapping spans)");
  if (options.first_bucket_bytes == 0 || options.bucket_cap_bytes == 0)
    throw InvalidArgument("bucket sizes: first bucket and cap must be positive");
  std::vector<Bucket> buckets;
  Bucket current;
  size_t current_bytes = 0;
  auto cap = [&] { return buckets.empty() ? options.first_bucket_bytes : options.bucket_cap_bytes; };
  auto close = [&] {
    if (current.params.empty()) return;
    current.begin = params[current.params.back()].offset;
    const ParamSpan& last = params[current.params.front()];
    current.end = last.offset + last.count;
    buckets.push_back(std::move(current));
    current = Bucket{};
    current_bytes = 0;
  };
  for (size_t i = params.size(); i-- > 0;) {
    const size_t bytes = params[i].count * element_bytes;
    if (!current.params.empty() && current_bytes + bytes > cap()) close();
    current.params.push_back(i);
    current_bytes += bytes;
  }
  close();
  return buckets;
}

BucketSchedule::BucketSchedule(std::span<const ParamSpan> params, size_t arena_elements, const BucketOptions& options) {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].offset + params[i].count > arena_elements)
      throw InvalidArgument("gradient arena: parameter " + std::to_string(i) + " ends at " +
                            std::to_string(params[i].offset + params[i].count) + " but the arena has " +
                            std::to_string(arena_elements) + " elements");
  buckets_ = assign_buckets(params, sizeof(float), options);
  bucket_of_param_.resize(params.size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t p : buckets_[b].params) bucket_of_param_[p] = b;
  begin_step();
}

void BucketSchedule::begin_step() {
  pending_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].params.size();
  ready_.assign(bucket_of_param_.size(), false);
  next_ = 0;
}

BucketSchedule::Range BucketSchedule::mark_ready(size_t param) {
  if (param >= ready_.size())
    throw InvalidArgument("gradient of parameter " + std::to_string(param) + " announced, but there are " +
                          std::to_string(ready_.size()) + " parameters");
  if (ready_[param]) return {next_, next_};
  ready_[param] = true;
  --pending_[bucket_of_param_[param]];
  return advance();
}

BucketSchedule::Range BucketSchedule::finish() {
  for (size_t b = next_; b < buckets_.size(); ++b) pending_[b] = 0;
  return advance();
}

BucketSchedule::Range BucketSchedule::advance() {
  const size_t first = next_;
  while (next_ < buckets_.size() && pending_[next_] == 0) ++next_;
  return {first, next_};
}

GradientReducer::GradientReducer(Communicator& comm, std::span<float> arena, std::vector<ParamSpan> params,
                                 const ReducerOptions& options)
    : comm_(comm), arena_(arena), options_(options), schedule_(params, arena.size(), options.buckets) {
  if (options_.compression != Compression::kNone) {
    staging_.resize(buckets().size());
    for (size_t b = 0; b < buckets().size(); ++b) staging_[b].resize(buckets()[b].end - buckets()[b].begin);
  }
}

GradientReducer::~GradientReducer() {
  // Buckets in flight reference the arena and the staging buffers: let them finish (errors were or will never be
  // observed; the destructor must not throw).
  for (auto& w : works_) {
    try {
      w.wait(comm_.timeout() * 2);
    } catch (...) {
    }
  }
}

void GradientReducer::begin_step() {
  std::lock_guard lock(mu_);
  schedule_.begin_step();
  works_.clear();
}

void GradientReducer::mark_ready(size_t param_index) {
  std::lock_guard lock(mu_);
  launch(schedule_.mark_ready(param_index));
}

// With mu_ held.
void GradientReducer::launch(BucketSchedule::Range range) {
  for (size_t b = range.begin; b < range.end; ++b) {
    const size_t bytes = (buckets()[b].end - buckets()[b].begin) *
                         (options_.compression == Compression::kNone ? sizeof(float) : sizeof(uint16_t));
    works_.push_back(comm_.submit("bucket_all_reduce", bytes, [this, b] { reduce_bucket(b); }));
  }
}

void GradientReducer::reduce_bucket(size_t b) {
  const Bucket& bucket = buckets()[b];
  std::span<float> grads = arena_.subspan(bucket.begin, bucket.end - bucket.begin);
  const double inv = 1.0 / comm_.size();
  if (options_.compression == Compression::kNone) {
    comm_.all_reduce_now(view_of(grads), ReduceOp::kSum);
    scale(view_of(grads), inv);
    return;
  }
  const DType t = options_.compression == Compression::kFp16 ? DType::kF16 : DType::kBF16;
  // Divide before compressing: fp16 sums of n gradients overflow far less often (bf16 keeps fp32's range anyway).
  scale(view_of(grads), inv);
  compress(t, grads, staging_[b].data());
  comm_.all_reduce_now(BufferView{staging_[b].data(), grads.size(), t}, ReduceOp::kSum);
  decompress(t, staging_[b].data(), grads);
}

void GradientReducer::wait() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Work> works;
  {
    std::lock_guard lock(mu_);
    launch(schedule_.finish());
    works = works_;
  }
  ReducerStepStats stats;
  std::exception_ptr first_error;
  for (auto& w : works) {
    try {
      w.wait(comm_.timeout() * 2);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
    stats.comm_seconds += w.seconds();
    stats.bytes += w.info().bytes;
  }
  stats.exposed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard lock(mu_);
    last_ = stats;
  }
  if (first_error) std::rethrow_exception(first_error);
}

ReducerStepStats GradientReducer::last_step() const {
  std::lock_guard lock(mu_);
  return last_;
}

std::string describe(const std::vector<Bucket>& buckets, size_t element_bytes) {
  size_t total = 0, largest = 0;
  for (const Bucket& b : buckets) {
    total += (b.end - b.begin) * element_bytes;
    largest = std::max(largest, (b.end - b.begin) * element_bytes);
  }
  const size_t first = buckets.empty() ? 0 : (buckets.front().end - buckets.front().begin) * element_bytes;
  return std::to_string(buckets.size()) + " bucket(s) over " + std::to_string(total) +
         " bytes of gradients (the first " + std::to_string(first) + " bytes, the largest " + std::to_string(largest) +
         ")";
}

}  // namespace torus::comm

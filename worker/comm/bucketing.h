#pragma once
// Gradient bucketing (PyTorch DDP's scheme): parameters are assigned to buckets in backward order by a pure function
// (first bucket 1 MiB so communication starts early, then up to a cap, 25 MiB by default), the same on every rank.
// The GradientReducer all-reduces each bucket on the communication thread as soon as its last gradient is ready,
// while backward continues, always in bucket order (so every rank issues the same collectives in the same order).
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "worker/comm/communicator.h"

namespace torus::comm {

// One parameter's gradient inside the one contiguous gradient arena, in elements.
struct ParamSpan {
  size_t offset = 0;
  size_t count = 0;
};

struct BucketOptions {
  size_t first_bucket_bytes = 1u << 20;
  size_t bucket_cap_bytes = 25u << 20;
};

struct Bucket {
  std::vector<size_t> params;  // parameter indices, in backward order (descending)
  size_t begin = 0;            // arena range covered, in elements (includes padding between its parameters)
  size_t end = 0;
};

// Parameters must be in ascending, non-overlapping arena order (InvalidArgument naming the parameter otherwise).
// Buckets are filled from the last parameter backwards; a parameter larger than the cap gets a bucket of its own.
std::vector<Bucket> assign_buckets(std::span<const ParamSpan> params, size_t element_bytes,
                                   const BucketOptions& options);

// "12 buckets over 42048 bytes of gradients (the first 4096 bytes, the largest 9216)": what each step's all-reduces
// carry, as the reducer assigned them (rank 0 logs it; sizes in `element_bytes` per gradient value).
std::string describe(const std::vector<Bucket>& buckets, size_t element_bytes);

// Which buckets may start as backward announces gradients: a bucket once all its gradients are final, and only in
// bucket order, so every rank issues the same collectives in the same order. The host reducer below and the GPU
// path (nccl/nccl_gradient_sync.h) both follow it. Not thread-safe: callers serialize.
class BucketSchedule {
 public:
  // Checks that every parameter lies inside an arena of `arena_elements` fp32 values (InvalidArgument naming the
  // parameter otherwise) and assigns the buckets (assign_buckets).
  BucketSchedule(std::span<const ParamSpan> params, size_t arena_elements, const BucketOptions& options);

  // Buckets [begin, end) in bucket order.
  struct Range {
    size_t begin = 0, end = 0;
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  void begin_step();
  // Marks parameter `param`'s gradient final; returns the buckets that may start now (none when it was already
  // marked, or an earlier bucket is still incomplete).
  Range mark_ready(size_t param);
  // Backward is over: every bucket not started yet (parameters that got no gradient keep the arena's values).
  Range finish();

 private:
  Range advance();

  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_param_;
  std::vector<size_t> pending_;  // per bucket: gradients still missing this step
  std::vector<bool> ready_;      // per parameter
  size_t next_ = 0;              // the first bucket not started this step
};

// Gradient compression on the wire is the job's spec.allReduce.compression.
using api::Compression;

struct ReducerOptions {
  BucketOptions buckets;
  Compression compression = Compression::kNone;
};

// What one step cost, for metrics.
struct ReducerStepStats {
  double exposed_seconds = 0;  // time wait() blocked: communication not hidden behind backward
  double comm_seconds = 0;     // sum of bucket all-reduce times on the communication thread
  size_t bytes = 0;            // bytes all-reduced (after compression)
};

class GradientReducer {
 public:
  // `arena` holds every gradient (fp32); the reducer averages it in place across `comm`'s ranks.
  GradientReducer(Communicator& comm, std::span<float> arena, std::vector<ParamSpan> params,
                  const ReducerOptions& options);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void begin_step();
  // Called from backward as each gradient is final; launches every bucket that became complete, in order.
  void mark_ready(size_t param_index);
  // Launches what is left (parameters that got no gradient this step keep the arena's values), waits for every
  // bucket and leaves the averaged gradients in the arena. Rethrows a failed collective.
  void wait();

  const std::vector<Bucket>& buckets() const { return schedule_.buckets(); }
  ReducerStepStats last_step() const;

 private:
  void launch(BucketSchedule::Range buckets);
  void reduce_bucket(size_t bucket);

  Communicator& comm_;
  std::span<float> arena_;
  ReducerOptions options_;
  std::vector<std::vector<uint16_t>> staging_;  // compressed copies, one per bucket (fp16/bf16 only)

  mutable std::mutex mu_;
  BucketSchedule schedule_;
  std::vector<Work> works_;
  ReducerStepStats last_;
};

}  // namespace torus::comm

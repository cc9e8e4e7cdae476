// worker/comm/bucketing.h: gradient buckets and the order they start in; the reducer that all-reduces them while
// backward runs, three ranks as threads.
#include "worker/comm/bucketing.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

TEST(Bucketing, FirstBucketSmallThenCappedInBackwardOrderCoveringEveryParameter) {
  std::vector<ParamSpan> params;
  size_t offset = 0;
  for (size_t count : {100000u, 300000u, 50000u, 2000000u, 70000u, 10u, 262144u}) {
    params.push_back({offset, count});
    offset += count;
  }
  BucketOptions opt;
  opt.bucket_cap_bytes = 4u << 20;
  auto buckets = assign_buckets(params, 4, opt);
  ASSERT_FALSE(buckets.empty());
  std::vector<int> seen(params.size(), 0);
  size_t expected_next = params.size();
  for (size_t b = 0; b < buckets.size(); ++b) {
    size_t bytes = 0;
    for (size_t p : buckets[b].params) {
      EXPECT_EQ(p + 1, expected_next);  // descending, consecutive: backward order
      expected_next = p;
      ++seen[p];
      bytes += params[p].count * 4;
    }
    const size_t cap = b == 0 ? opt.first_bucket_bytes : opt.bucket_cap_bytes;
    if (buckets[b].params.size() > 1) {
      EXPECT_LE(bytes, cap) << "bucket " << b;
    }
    EXPECT_EQ(buckets[b].begin, params[buckets[b].params.back()].offset);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{6}));            // 262144 floats = 1 MiB: the first bucket is full
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{5, 4}));         // 4 MiB cap: parameter 3 (8 MB) does not fit
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{3}));            // larger than the cap: a bucket of its own
  EXPECT_EQ(assign_buckets(params, 4, opt).size(), buckets.size());  // pure: same answer every time
  std::vector<ParamSpan> overlapping = {{0, 10}, {5, 10}};
  EXPECT_THROW(assign_buckets(overlapping, 4, opt), InvalidArgument);
}

// Buckets start only in bucket order, each once its gradients are final; finish() starts the rest. Both gradient
// paths (host reducer, NCCL) launch exactly what this returns.
TEST(Bucketing, ScheduleStartsCompleteBucketsInBucketOrderOnly) {
  // Four parameters of 1 MiB: with 1 MiB buckets each is a bucket of its own, bucket b holding parameter 3 - b.
  std::vector<ParamSpan> params;
  for (size_t i = 0; i < 4; ++i) params.push_back({i * 262144, 262144});
  BucketOptions opt;
  opt.bucket_cap_bytes = 1u << 20;
  BucketSchedule s(params, 4 * 262144, opt);
  ASSERT_EQ(s.buckets().size(), 4u);
  using R = BucketSchedule::Range;
  auto range = [](R r) { return std::make_pair(r.begin, r.end); };
  EXPECT_EQ(range(s.mark_ready(2)), std::make_pair(size_t{0}, size_t{0}));  // bucket 1 waits for bucket 0
  EXPECT_EQ(range(s.mark_ready(3)), std::make_pair(size_t{0}, size_t{2}));  // bucket 0 completes: 0 and 1 start
  EXPECT_EQ(range(s.mark_ready(3)), std::make_pair(size_t{2}, size_t{2}));  // announced twice: nothing new
  EXPECT_EQ(range(s.finish()), std::make_pair(size_t{2}, size_t{4}));       // parameters 0, 1 got no gradient
  s.begin_step();
  EXPECT_EQ(range(s.mark_ready(3)), std::make_pair(size_t{0}, size_t{1}));  // a new step starts from bucket 0
  EXPECT_THROW(s.mark_ready(4), InvalidArgument);
  EXPECT_THROW(BucketSchedule(params, 4 * 262144 - 1, opt), InvalidArgument);  // the last parameter overruns
}

TEST(GradientReducer, AveragesBucketsLaunchedDuringBackwardWithAndWithoutCompression) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  const int n = 3;
  testing::run_ranks(n, [&](int rank) {
    auto world = make_world(testing::sim_env(rank, 1, n, server.port(), testing::test_name()), testing::test_options());
    std::vector<ParamSpan> params;
    size_t offset = 0;
    for (size_t count : {1000u, 300000u, 17u, 200000u, 5u}) {
      params.push_back({offset, count});
      offset += count + 3;  // padding between parameters, as an aligned arena would have
    }
    for (Compression comp : {Compression::kNone, Compression::kBf16, Compression::kFp16}) {
      std::vector<float> arena(offset);
      ReducerOptions opt;
      opt.buckets.first_bucket_bytes = 4096;
      opt.buckets.bucket_cap_bytes = 1u << 20;
      opt.compression = comp;
      GradientReducer reducer(world->comm(), arena, params, opt);
      EXPECT_GE(reducer.buckets().size(), 3u);
      for (int step = 0; step < 2; ++step) {
        reducer.begin_step();
        for (size_t p = params.size(); p-- > 0;) {  // backward order
          for (size_t i = 0; i < params[p].count; ++i)
            arena[params[p].offset + i] = static_cast<float>((rank + 1) * (step + 1)) + static_cast<float>(i % 5);
          reducer.mark_ready(p);
        }
        reducer.wait();
        const double tol = comp == Compression::kNone ? 1e-5 : comp == Compression::kFp16 ? 5e-3 : 3e-2;
        for (const auto& ps : params)
          for (size_t i = 0; i < ps.count; ++i) {
            const double expected = 2.0 * (step + 1) + static_cast<double>(i % 5);  // mean of (r+1)(s+1) + i%5
            ASSERT_NEAR(arena[ps.offset + i], expected, tol * expected) << "compression " << static_cast<int>(comp);
          }
        EXPECT_GT(reducer.last_step().bytes, 0u);
      }
    }
  });
}

}  // namespace
}  // namespace torus::comm

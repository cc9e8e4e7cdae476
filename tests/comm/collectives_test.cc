// Multi-rank tests with ranks as threads, each with its own World over one shared store, under simulated node
// groupings: every algorithm must equal a reference sum.
#include <gtest/gtest.h>

#include <cmath>
#include <latch>
#include <numeric>

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/comm/bucketing.h"
#include "worker/comm/shm_communicator.h"
#include "worker/comm/store.h"
#include "worker/comm/train_adapters.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;
using testing::run_ranks;
using testing::sim_env;
using testing::test_options;

struct Shape {
  int nodes;
  int per_node;
};

std::string job_name() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

// Values every rank can recompute: rank r contributes f(r, i).
float value_f(int r, size_t i) { return static_cast<float>((r + 1) * 0.25 + static_cast<double>(i % 17) * 0.125); }
int64_t value_i(int r, size_t i) { return static_cast<int64_t>((r + 1) * 1000003 + i * 7); }

void check_all_reduce(World& w, AllReduceAlgorithm a, size_t count) {
  const int n = w.size();
  std::vector<float> f(count);
  std::vector<int64_t> q(count);
  for (size_t i = 0; i < count; ++i) {
    f[i] = value_f(w.rank(), i);
    q[i] = value_i(w.rank(), i);
  }
  w.comm().all_reduce_with(a, view_of(std::span<float>(f)), ReduceOp::kSum);
  w.comm().all_reduce_with(a, view_of(std::span<int64_t>(q)), ReduceOp::kSum);
  for (size_t i = 0; i < count; ++i) {
    double ref = 0;
    int64_t ref_i = 0;
    for (int r = 0; r < n; ++r) {
      ref += value_f(r, i);
      ref_i += value_i(r, i);
    }
    ASSERT_NEAR(f[i], ref, 1e-4 * std::abs(ref) + 1e-5) << api::to_string(a) << " count " << count << " at " << i;
    ASSERT_EQ(q[i], ref_i) << api::to_string(a) << " count " << count << " at " << i;
  }
}

class AllReduceShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(AllReduceShapes, EveryAlgorithmEqualsTheReferenceSum) {
  const Shape s = GetParam();
  const int n = s.nodes * s.per_node;
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  const std::string job = job_name() + std::to_string(s.nodes) + "x" + std::to_string(s.per_node);
  run_ranks(n, [&](int rank) {
    auto world = make_world(sim_env(rank, s.nodes, s.per_node, server.port(), job), test_options());
    for (AllReduceAlgorithm a : {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHierarchical,
                                 AllReduceAlgorithm::kTorus2d, AllReduceAlgorithm::kAuto}) {
      if (a != AllReduceAlgorithm::kAuto && !world->comm().planner().applicable(a)) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{1009}, size_t{40961}})
        check_all_reduce(*world, a, count);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Groupings, AllReduceShapes,
                         ::testing::Values(Shape{1, 1}, Shape{1, 2}, Shape{1, 3}, Shape{1, 4}, Shape{2, 2}, Shape{2, 3},
                                           Shape{4, 2}),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return std::to_string(p.param.nodes) + "x" + std::to_string(p.param.per_node);
                         });

TEST(AllReduce, LargeBuffersThroughEveryLevel) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  run_ranks(4, [&](int rank) {
    auto world = make_world(sim_env(rank, 2, 2, server.port(), job_name()), test_options());
    for (AllReduceAlgorithm a :
         {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHierarchical, AllReduceAlgorithm::kTorus2d})
      check_all_reduce(*world, a, (1u << 21) + 3);  // 8 MiB of floats, not divisible by 4
    auto stats = world->comm().stats();
    EXPECT_GT(stats["hierarchical/outer_all_reduce"].calls, 0u);
    EXPECT_GT(stats["hierarchical"].seconds, 0.0);
  });
}

TEST(Collectives, ReduceScatterAllGatherBroadcastBarrierSplit) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  const int n = 3;
  run_ranks(n, [&](int rank) {
    auto world = make_world(sim_env(rank, 3, 1, server.port(), job_name()), test_options());
    auto& c = world->comm();
    for (size_t count : {size_t{0}, size_t{2}, size_t{7}, size_t{100}}) {
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(rank * 100 + i);
      c.reduce_scatter(view_of(std::span<int32_t>(v))).wait(milliseconds(20000));
      const Range mine = chunk_range(count, n, rank);
      for (size_t i = mine.begin; i < mine.end; ++i) ASSERT_EQ(v[i], static_cast<int32_t>(300 + 3 * i)) << i;
      // All-gather the reduced chunks back: everyone ends with the full sum.
      c.all_gather(view_of(std::span<int32_t>(v))).wait(milliseconds(20000));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], static_cast<int32_t>(300 + 3 * i)) << i;
    }
    std::vector<float> params(1001, rank == 2 ? 7.5f : 0.0f);
    c.broadcast(view_of(std::span<float>(params)), 2).wait(milliseconds(20000));
    for (float p : params) ASSERT_EQ(p, 7.5f);
    c.barrier().wait(milliseconds(20000));
    EXPECT_THROW(c.broadcast(view_of(std::span<float>(params)), 3), InvalidArgument);

    // Split: ranks {0, 2} (even) and {1} (odd); keys reverse the order inside a color.
    auto sub = c.split(rank % 2, -rank);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), rank % 2 == 0 ? 2 : 1);
    EXPECT_EQ(sub->rank(), rank == 2 ? 0 : 0 + (rank == 0 ? 1 : 0));
    std::vector<double> x = {static_cast<double>(rank)};
    sub->all_reduce(view_of(std::span<double>(x))).wait(milliseconds(20000));
    EXPECT_EQ(x[0], rank % 2 == 0 ? 2.0 : 1.0);
    auto none = c.split(rank == 1 ? -1 : 0, rank);
    EXPECT_EQ(none == nullptr, rank == 1);
    // Use it before dropping it: a peer may still be finishing its side of the connection handshake.
    if (none) none->barrier().wait(milliseconds(20000));
  });
}

TEST(GradientReducer, AveragesBucketsLaunchedDuringBackwardWithAndWithoutCompression) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  const int n = 3;
  run_ranks(n, [&](int rank) {
    auto world = make_world(sim_env(rank, 1, n, server.port(), job_name()), test_options());
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

TEST(TrainAdapters, CollectivesAndGradientSyncServeTheTrainingLoop) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  run_ranks(2, [&](int rank) {
    auto world = make_world(sim_env(rank, 1, 2, server.port(), job_name()), test_options());
    CommCollectives coll(world->comm());
    worker::train::Collectives& c = coll;
    EXPECT_EQ(c.world_size(), 2);
    std::vector<double> metrics = {1.5 * (rank + 1), 10.0};
    c.all_reduce_sum(metrics);
    EXPECT_EQ(metrics, (std::vector<double>{4.5, 20.0}));
    std::vector<float> weights(5, rank == 0 ? 3.0f : -1.0f);
    c.broadcast(weights, 0);
    EXPECT_EQ(weights, std::vector<float>(5, 3.0f));
    c.barrier();

    std::vector<float> arena(10, static_cast<float>(rank * 2));  // ranks hold 0 and 2: the mean is 1
    CommGradientSync sync(world->comm(), arena, {{0, 4}, {4, 6}}, ReducerOptions{});
    worker::train::GradientSync& g = sync;
    g.begin_step();
    g.grad_ready(1);
    g.grad_ready(0);
    g.finish_step();
    EXPECT_EQ(arena, std::vector<float>(10, 1.0f));
  });
}

TEST(SharedMemory, DeadLocalPeerBecomesATimeoutNamingIt) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = "k";
  auto base = std::make_shared<TcpStore>(o);
  std::latch attached(2);
  run_ranks(2, [&](int rank) {
    ShmOptions opt;
    opt.timeout = milliseconds(300);
    ShmCommunicator shm(rank, 2, std::make_shared<PrefixStore>(job_name(), base), opt);
    attached.arrive_and_wait();
    if (rank == 1) return;  // never joins the collective
    std::vector<float> v(100, 1.0f);
    try {
      shm.all_reduce_now(view_of(std::span<float>(v)), ReduceOp::kSum);
      ADD_FAILURE() << "all-reduce with a missing peer returned";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("local ranks 1 never arrived"), std::string::npos) << e.what();
    }
  });
}

TEST(Watchdog, ReportsTheRanksThatNeverArrived) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  auto options = test_options();
  options.timeout = milliseconds(500);
  std::latch done(2);
  run_ranks(2, [&](int rank) {
    auto world = make_world(sim_env(rank, 2, 1, server.port(), job_name()), options);
    if (rank == 0) {
      std::vector<float> v(1000, 1.0f);
      Work w = world->comm().all_reduce(view_of(std::span<float>(v)));
      EXPECT_THROW(w.wait(milliseconds(20000)), Error);
      const std::string report = world->watchdog().reports();
      EXPECT_NE(report.find("all_reduce #1"), std::string::npos) << report;
      EXPECT_NE(report.find("ranks that never arrived: 1"), std::string::npos) << report;
    }
    done.arrive_and_wait();  // rank 1 stays alive (hung, from rank 0's view) until rank 0 has its answer
  });
}

}  // namespace
}  // namespace torus::comm

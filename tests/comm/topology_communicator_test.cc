// The topology-aware communicator (topology_communicator.cc) with ranks as threads, each with its own World over one
// shared store, under simulated node groupings: every algorithm must equal a reference sum.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;
using testing::run_ranks;
using testing::sim_env;
using testing::test_name;
using testing::test_options;

struct Shape {
  int nodes;
  int per_node;
};

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
  const std::string job = test_name() + std::to_string(s.nodes) + "x" + std::to_string(s.per_node);
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
    auto world = make_world(sim_env(rank, 2, 2, server.port(), test_name()), test_options());
    for (AllReduceAlgorithm a :
         {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kHierarchical, AllReduceAlgorithm::kTorus2d})
      check_all_reduce(*world, a, (1u << 21) + 3);  // 8 MiB of floats, not divisible by 4
    auto stats = world->comm().stats();
    EXPECT_GT((stats[{"hierarchical", "outer_all_reduce"}].calls), 0u);
    EXPECT_GT(stats[{"hierarchical"}].seconds, 0.0) << "the whole all-reduce, level " << comm::kWholeAllReduce;
  });
}

TEST(Collectives, ReduceScatterAllGatherBroadcastBarrierSplit) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  const int n = 3;
  run_ranks(n, [&](int rank) {
    auto world = make_world(sim_env(rank, 3, 1, server.port(), test_name()), test_options());
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

}  // namespace
}  // namespace torus::comm

// Single-process tests of the comm layer's pure parts and of the rendezvous store.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/launch/rank_env.h"
#include "common/util/error.h"
#include "worker/comm/bucketing.h"
#include "worker/comm/socket.h"
#include "worker/comm/store.h"
#include "worker/comm/topology.h"
#include "worker/comm/types.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

TEST(ChunkRange, CoversEveryCountExactlyOnce) {
  for (size_t count : {0u, 1u, 2u, 7u, 13u, 1000u, 1001u}) {
    for (int n : {1, 2, 3, 4, 7, 8}) {
      size_t next = 0;
      for (int r = 0; r < n; ++r) {
        Range c = chunk_range(count, n, r);
        EXPECT_EQ(c.begin, next) << count << " " << n << " " << r;
        EXPECT_LE(c.size(), count / n + 1);
        next = c.end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Reduce, ManyInputsMatchPairwiseSums) {
  std::vector<std::vector<double>> in(5, std::vector<double>(5003));
  for (size_t j = 0; j < in.size(); ++j)
    for (size_t i = 0; i < in[j].size(); ++i) in[j][i] = static_cast<double>(i * (j + 1)) * 0.5;
  std::vector<const void*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<double> out(5003);
  reduce_many(DType::kF64, ReduceOp::kSum, out.data(), ptrs.data(), 5, out.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<double>(i) * 0.5 * 15) << i;
  std::vector<int32_t> a = {1, 5, -3}, b = {4, 2, -1}, m(3);
  reduce_into(DType::kI32, ReduceOp::kMax, m.data(), a.data(), b.data(), 3);
  EXPECT_EQ(m, (std::vector<int32_t>{4, 5, -1}));
}

// The node -> block map the operator mounts (TORUS_TOPOLOGY_BLOCKS_FILE), written to a temporary file.
std::string write_blocks_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Topology, RingOrderGroupsRanksByTheBlocksReadFromTheFile) {
  // Four single-rank nodes alternating between two racks: the ring visits rack-a's nodes, then rack-b's.
  const std::string path = write_blocks_file("torus_ring_blocks.json",
                                             R"({"n0": "rack-b", "n1": "rack-a", "n2": "rack-b", "n3": "rack-a"})");
  Topology t;
  for (int r = 0; r < 4; ++r) {
    RankEnv e = launch::rank_env_from({{"WORLD_SIZE", "4"},
                                       {"RANK", std::to_string(r)},
                                       {"LOCAL_WORLD_SIZE", "1"},
                                       {"TORUS_NODE_NAME", "n" + std::to_string(r)},
                                       {"TORUS_TOPOLOGY_BLOCKS_FILE", path}});
    t.ranks.push_back(place_of(e));
  }
  EXPECT_EQ(t.ring_order(), (std::vector<int>{1, 3, 0, 2}));
  std::remove(path.c_str());
}

Topology two_racks() {
  Topology t;
  // Ranks 0,1 on node 0 in rack b; ranks 2,3 on node 1 in rack a: ring order puts rack a first.
  t.ranks = {{0, 0, 0, "h0", "b"}, {1, 0, 1, "h0", "b"}, {2, 1, 0, "h1", "a"}, {3, 1, 1, "h1", "a"}};
  return t;
}

TEST(Topology, RingOrderFollowsRacksAndJsonRoundTrips) {
  Topology t = two_racks();
  EXPECT_EQ(t.ring_order(), (std::vector<int>{2, 3, 0, 1}));
  EXPECT_TRUE(t.uniform());
  EXPECT_EQ(t.ranks_per_node(), 2);
  Topology back = Topology::from_json(t.to_json(), "dump");
  ASSERT_EQ(back.world_size(), 4);
  EXPECT_EQ(back.ranks[2].block, "a");
  EXPECT_EQ(back.ranks[3].node_name, "h1");
}

TEST(Topology, BadFilesAreRejectedWithTheirName) {
  try {
    Topology::from_json(R"({"ranks":[{"rank":0,"nodeRank":0,"localRank":0},{"rank":0,"nodeRank":0,"localRank":1}]})",
                        "topo.json");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("topo.json: ranks"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Topology::from_json("{", "topo.json"), InvalidArgument);
  EXPECT_THROW(Topology::from_json(R"({"ranks":[{"rank":0}]})", "topo.json"), InvalidArgument);
}

TEST(Planner, CostModelPicksSharedMemoryForOneHostAndRingForTinyMessagesAcrossNodes) {
  Topology one_host;
  for (int r = 0; r < 4; ++r) one_host.ranks.push_back({r, 0, r, "h", ""});
  Planner p(one_host, CostModel{}, torus_grid(4, 0), true);
  EXPECT_EQ(p.choose(64 << 20), AllReduceAlgorithm::kHierarchical);
  // The table's header keeps its columns apart ("hierarchical_ms" is the widest name).
  EXPECT_NE(p.describe().find("ring_ms hierarchical_ms "), std::string::npos) << p.describe();

  Topology spread;  // 8 nodes of 1 rank: hierarchical does not apply
  for (int r = 0; r < 8; ++r) spread.ranks.push_back({r, r, 0, "h" + std::to_string(r), ""});
  Planner q(spread, CostModel{}, torus_grid(8, 0), true);
  EXPECT_FALSE(q.applicable(AllReduceAlgorithm::kHierarchical));
  EXPECT_EQ(q.grid().x, 4);
  EXPECT_EQ(q.grid().y, 2);
  // Fewer latency steps for small messages: 2(X-1)+2(Y-1) = 8 < 2(n-1) = 14.
  EXPECT_EQ(q.choose(4 << 10), AllReduceAlgorithm::kTorus2d);
  EXPECT_LT(q.predict(AllReduceAlgorithm::kTorus2d, 4 << 10), q.predict(AllReduceAlgorithm::kRing, 4 << 10));
  EXPECT_THROW(torus_grid(6, 4), InvalidArgument);
}

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

// ---------------------------------------------------------------- store

TcpStoreOptions client_of(const TcpStoreServer& server, const std::string& secret) {
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = secret;
  o.connect_timeout = milliseconds(5000);
  o.request_timeout = milliseconds(5000);
  return o;
}

TEST(Store, SetGetAddWaitCheckErase) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  auto base = std::make_shared<TcpStore>(client_of(server, "k"));
  PrefixStore store("job/0", base);
  store.set("a", to_bytes("1"));
  EXPECT_EQ(to_string(store.get("a", milliseconds(100))), "1");
  EXPECT_EQ(to_string(base->get("job/0/a", milliseconds(100))), "1");
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
  EXPECT_EQ(store.check({"a", "b"}), (std::vector<bool>{true, false}));
  EXPECT_EQ(store.wait({"a", "b"}, milliseconds(50)), (std::vector<std::string>{"b"}));
  EXPECT_THROW(store.get("b", milliseconds(50)), Timeout);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  PrefixStore next_attempt("job/1", base);  // a restarted gang does not see the old keys
  EXPECT_EQ(next_attempt.check({"n"}), (std::vector<bool>{false}));
}

TEST(Store, WaitWakesWhenAnotherClientSets) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStore a(client_of(server, "k"));
  TcpStore b(client_of(server, "k"));
  std::thread setter([&] { b.set("late", to_bytes("x")); });
  EXPECT_EQ(to_string(a.get("late", milliseconds(5000))), "x");
  setter.join();
}

TEST(Store, WrongSecretIsRefusedAndCounted) {
  TcpStoreServer server("127.0.0.1", 0, "right");
  try {
    TcpStore intruder(client_of(server, "wrong"));
    FAIL() << "a client with the wrong secret was admitted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.refused_clients(), 1);
  TcpStore friendly(client_of(server, "right"));
  friendly.set("ok", to_bytes("1"));
}

TEST(Store, LateServerIsWaitedFor) {
  int port = 0;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);  // reserve a free port number, then release it for the late server
    port = bound_port(probe);
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(300));  // the point of the test: rank 0 comes up late
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port, "k");
  });
  TcpStoreOptions o;
  o.port = port;
  o.secret = "k";
  o.connect_timeout = milliseconds(10000);
  TcpStore client(o);
  client.set("x", to_bytes("1"));
  late.join();
}

TEST(Store, UnreachableServerTimesOutNamingTheAddress) {
  int port = 0;
  {
    Fd probe = listen_tcp("127.0.0.1", 0);
    port = bound_port(probe);
  }
  TcpStoreOptions o;
  o.port = port;
  o.connect_timeout = milliseconds(200);
  try {
    TcpStore client(o);
    FAIL();
  } catch (const Timeout& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torus::comm

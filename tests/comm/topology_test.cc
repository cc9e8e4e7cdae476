// worker/comm/topology.h: ranks placed from the launch contract and the blocks file, ring order, the JSON
// form, and the planner's cost model.
#include "worker/comm/topology.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/launch/rank_env.h"
#include "common/util/error.h"

namespace torus::comm {
namespace {

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

}  // namespace
}  // namespace torus::comm

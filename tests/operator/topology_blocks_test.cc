// Rack ordering in Kubernetes: the node -> block map from node labels, the ConfigMap entry and worker env the
// planner derives from it, the RackOrdering condition, and status.ranks[].block. Pure, table-driven.
#include "operator/controller/topology_blocks.h"

#include <gtest/gtest.h>

#include <map>

#include "common/api/codec.h"
#include "operator/controller/children.h"
#include "operator/controller/planner.h"
#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

constexpr const char* kRack = "topology.torus.dev/rack";
constexpr const char* kBlocksPath = "/etc/torus/job/topology-blocks.json";

std::map<std::string, std::string> env_of(const json& pod) {
  std::map<std::string, std::string> env;
  for (const auto& e : pod["spec"]["containers"][0]["env"]) env[e["name"]] = e.value("value", "");
  return env;
}

const json* created(const Plan& p, ChildKind kind) {
  for (const auto& c : p.creates) {
    if (c.kind == kind) return &c.object;
  }
  return nullptr;
}

const api::Condition* rack_condition(const Plan& p, api::TrainingJobStatus& holder) {
  if (!p.status) return nullptr;
  json doc = {{"apiVersion", "torus.dev/v1alpha1"}, {"kind", "TrainingJob"}, {"status", *p.status}};
  holder = api::decode_json(doc).job.status;
  return api::find_condition(holder, api::condition::kRackOrdering);
}

TEST(BlockMap, TakesEveryNodeCarryingTheLabelSortedByName) {
  struct Case {
    std::string name;
    std::vector<json> nodes;
    std::string key;
    BlockMap want;
  };
  const std::vector<Case> cases = {
      {"labelled nodes, sorted",
       {NodeBuilder("node-b").label(kRack, "rack-1").build(), NodeBuilder("node-a").label(kRack, "rack-0").build()},
       kRack,
       {{"node-a", "rack-0"}, {"node-b", "rack-1"}}},
      {"unlabelled node left out",
       {NodeBuilder("node-a").label(kRack, "rack-0").build(), NodeBuilder("node-x").label("other", "v").build()},
       kRack,
       {{"node-a", "rack-0"}}},
      {"other key", {NodeBuilder("node-a").label(kRack, "rack-0").build()}, "example.com/switch", {}},
      {"no key", {NodeBuilder("node-a").label(kRack, "rack-0").build()}, "", {}},
      {"no nodes", {}, kRack, {}},
  };
  for (const auto& c : cases) EXPECT_EQ(block_map(c.nodes, c.key), c.want) << c.name;
  EXPECT_EQ(block_map_text({{"node-b", "rack-1"}, {"node-a", "rack-0"}}), R"({"node-a":"rack-0","node-b":"rack-1"})");
}

TEST(BlockMap, PlanSaysWhetherTheMapIsMounted) {
  BlockMap huge;
  for (int i = 0; huge.size() < 40000; ++i)
    huge["node-with-a-long-name-" + std::to_string(i)] = "rack-" + std::to_string(i);
  struct Case {
    std::string name;
    std::string key;
    std::optional<BlockMap> blocks;
    RackOrdering want;
  };
  const std::vector<Case> cases = {
      {"no key", "", BlockMap{{"n", "r"}}, RackOrdering::kNotRequested},
      {"mounted", kRack, BlockMap{{"n", "r"}}, RackOrdering::kMounted},
      {"mounted, empty map", kRack, BlockMap{}, RackOrdering::kMounted},
      {"nodes not readable", kRack, std::nullopt, RackOrdering::kNodesNotReadable},
      {"too large", kRack, huge, RackOrdering::kTooLarge},
  };
  for (const auto& c : cases) {
    BlocksPlan b = plan_blocks(c.key, c.blocks);
    EXPECT_EQ(b.ordering, c.want) << c.name;
    EXPECT_EQ(b.text.empty(), c.want != RackOrdering::kMounted) << c.name;
    EXPECT_LE(b.text.size(), kMaxBlockMapBytes) << c.name;
  }
}

TEST(RackOrderingPlan, ConfigMapAndWorkerEnvFollowTheTopologyKey) {
  const BlockMap two_racks = {{"node-0", "rack-0"}, {"node-1", "rack-1"}};
  struct Case {
    std::string name;
    json job;
    std::optional<BlockMap> blocks;
    bool mounted;
    std::string condition_reason;  // "" = no RackOrdering condition
  };
  const std::vector<Case> cases = {
      {"topology key", JobBuilder().topology(kRack, "Preferred").build(), two_racks, true, "BlockMapMounted"},
      {"no topology key", JobBuilder().build(), two_racks, false, ""},
      {"nodes not readable", JobBuilder().topology(kRack, "Preferred").build(), std::nullopt, false,
       "NodesNotReadable"},
  };
  for (const auto& c : cases) {
    PlanInput in{c.job, {}, {}, {}, {}, at(0), "s3cret", c.blocks};
    Plan p = plan(in);
    const json* cm = created(p, ChildKind::kConfigMap);
    const json* pod = created(p, ChildKind::kPod);
    ASSERT_TRUE(cm && pod) << c.name << ": " << p.invalid_spec;
    auto env = env_of(*pod);
    if (c.mounted) {
      EXPECT_EQ(json::parse((*cm)["data"]["topology-blocks.json"].get<std::string>()), json(two_racks)) << c.name;
      EXPECT_EQ(env["TORUS_TOPOLOGY_KEY"], kRack) << c.name;
      EXPECT_EQ(env["TORUS_TOPOLOGY_BLOCKS_FILE"], kBlocksPath) << c.name;
    } else {
      EXPECT_FALSE((*cm)["data"].contains("topology-blocks.json")) << c.name;
      EXPECT_EQ(env.count("TORUS_TOPOLOGY_KEY") + env.count("TORUS_TOPOLOGY_BLOCKS_FILE"), 0u) << c.name;
    }
    EXPECT_TRUE((*cm)["data"].contains("job.json")) << c.name;
    api::TrainingJobStatus holder;
    const api::Condition* cond = rack_condition(p, holder);
    if (c.condition_reason.empty()) {
      EXPECT_EQ(cond, nullptr) << c.name;
    } else {
      ASSERT_NE(cond, nullptr) << c.name;
      EXPECT_EQ(cond->reason, c.condition_reason) << c.name;
      EXPECT_EQ(cond->status == api::ConditionStatus::kTrue, c.mounted) << c.name;
    }
    bool warned = false;
    for (const auto& e : p.events) warned |= e.reason == "RackOrderingOff";
    EXPECT_EQ(warned, c.condition_reason == "NodesNotReadable") << c.name;
  }
}

TEST(RackOrderingPlan, ExistingConfigMapIsUpdatedOnlyWhenTheMapDiffers) {
  json job = JobBuilder().topology(kRack, "Preferred").phase("Pending").build();
  const BlockMap blocks = {{"node-0", "rack-0"}, {"node-1", "rack-1"}};
  // Made for this spec (spec_edits.h): the job file is current, only the map can differ.
  auto config_map = [&job](std::optional<std::string> map_text) {
    json cm = {{"metadata",
                {{"name", "mnist-config"},
                 {"namespace", "team"},
                 {"resourceVersion", "12"},
                 {"annotations", {{std::string(kAnnotationSpecHash), spec_hash_of(job)}}}}},
               {"data", {{"job.json", "{}"}}}};
    if (map_text) cm["data"]["topology-blocks.json"] = *map_text;
    return cm;
  };
  struct Case {
    std::string name;
    json existing;
    std::optional<BlockMap> blocks;
    std::optional<std::string> want;  // the map after the update; nullopt: the key removed; no update when equal
    bool update;
  };
  const std::string current = block_map_text(blocks);
  const std::vector<Case> cases = {
      {"equal: nothing written", config_map(current), blocks, current, false},
      {"node relabelled", config_map(current), BlockMap{{"node-0", "rack-0"}, {"node-1", "rack-0"}},
       block_map_text({{"node-0", "rack-0"}, {"node-1", "rack-0"}}), true},
      {"written before the key was added", config_map(std::nullopt), blocks, current, true},
      {"nodes no longer readable", config_map(current), std::nullopt, std::nullopt, true},
  };
  for (const auto& c : cases) {
    PlanInput in = with_children(job, {}, at(1));
    in.config_maps = objects_of({c.existing});
    in.node_blocks = c.blocks;
    Plan p = plan(in);
    EXPECT_EQ(created(p, ChildKind::kConfigMap), nullptr) << c.name;
    ASSERT_EQ(p.updates.size(), c.update ? 1u : 0u) << c.name;
    if (!c.update) continue;
    const json& cm = p.updates[0].object;
    EXPECT_EQ(p.updates[0].kind, ChildKind::kConfigMap);
    EXPECT_EQ(cm["metadata"]["resourceVersion"], "12") << c.name << ": the update must carry the observed version";
    EXPECT_EQ(cm["data"]["job.json"], "{}") << c.name << ": only the map is rewritten";
    if (c.want) {
      EXPECT_EQ(cm["data"]["topology-blocks.json"], *c.want) << c.name;
    } else {
      EXPECT_FALSE(cm["data"].contains("topology-blocks.json")) << c.name;
    }
  }
}

TEST(RackOrderingPlan, StatusRanksCarryTheBlockWhenTheJobHasAKey) {
  const BlockMap blocks = {{"node-a", "rack-0"}, {"node-b", "rack-1"}};
  std::vector<json> pods = {PodBuilder("mnist", 1).running("node-b").build(),
                            PodBuilder("mnist", 0).running("node-a").build(),
                            PodBuilder("mnist", 2).running("node-new").build()};
  struct Case {
    std::string name;
    json job;
    std::vector<std::string> want;  // block per rank
  };
  const std::vector<Case> cases = {
      {"with key",
       JobBuilder().workers(3).topology(kRack, "Preferred").phase("Pending").build(),
       {"rack-0", "rack-1", ""}},
      {"without key", JobBuilder().workers(3).phase("Pending").build(), {"", "", ""}},
  };
  for (const auto& c : cases) {
    PlanInput in = with_children(c.job, pods, at(5));
    in.node_blocks = blocks;
    Plan p = plan(in);
    ASSERT_TRUE(p.status) << c.name;
    const json& ranks = (*p.status)["ranks"];
    ASSERT_EQ(ranks.size(), c.want.size()) << c.name;
    for (size_t r = 0; r < c.want.size(); ++r) {
      EXPECT_EQ(ranks[r].value("block", ""), c.want[r]) << c.name << " rank " << r;
      EXPECT_EQ(ranks[r].contains("block"), !c.want[r].empty()) << c.name << ": an empty block is left out";
    }
  }
}

TEST(RackOrderingPlan, TooLargeMapTurnsOrderingOffWithOneWarning) {
  BlockMap huge;
  for (int i = 0; huge.size() < 40000; ++i)
    huge["node-with-a-long-name-" + std::to_string(i)] = "rack-" + std::to_string(i);
  json job = JobBuilder().topology(kRack, "Preferred").build();
  PlanInput in{job, {}, {}, {}, {}, at(0), "s3cret", huge};
  Plan first = plan(in);
  const json* cm = created(first, ChildKind::kConfigMap);
  ASSERT_NE(cm, nullptr);
  EXPECT_FALSE((*cm)["data"].contains("topology-blocks.json"));
  EXPECT_EQ(env_of(*created(first, ChildKind::kPod)).count("TORUS_TOPOLOGY_BLOCKS_FILE"), 0u);
  api::TrainingJobStatus holder;
  const api::Condition* cond = rack_condition(first, holder);
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->reason, "BlockMapTooLarge");
  EXPECT_NE(cond->message.find("rack ordering is off"), std::string::npos) << cond->message;
  int warnings = 0;
  for (const auto& e : first.events) warnings += e.reason == "RackOrderingOff";
  EXPECT_EQ(warnings, 1);
  // The next pass, with the condition already recorded, warns no more.
  job["status"] = *first.status;
  PlanInput again = with_children(job, {}, at(1));
  again.config_maps = objects_of({*cm});
  again.node_blocks = huge;
  Plan second = plan(again);
  for (const auto& e : second.events) EXPECT_NE(e.reason, "RackOrderingOff");
  EXPECT_TRUE(second.updates.empty());
}

}  // namespace
}  // namespace torus::controller

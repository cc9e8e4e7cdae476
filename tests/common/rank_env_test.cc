// The launch contract's reader and writer (common/launch/rank_env.h): what one launcher writes, every reader reads
// back; a pod of local ranks; errors that name the variable.
#include "common/launch/rank_env.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/api/defaults.h"
#include "common/util/error.h"

namespace torus::launch {
namespace {

TEST(RankEnv, ParsesTheRankEnvironment) {
  RankEnv e = rank_env_from({{"MASTER_ADDR", "10.0.0.1"},
                             {"MASTER_PORT", "1234"},
                             {"WORLD_SIZE", "8"},
                             {"RANK", "5"},
                             {"LOCAL_RANK", "1"},
                             {"LOCAL_WORLD_SIZE", "4"},
                             {"NODE_RANK", "1"},
                             {"TORUS_ATTEMPT", "3"},
                             {"TORUS_JOB_NAME", "mnist"},
                             {"TORUS_NODE_NAME", "n1"},
                             {"TORUS_TOPOLOGY_BLOCK", "rack-a"},
                             {"TORUS_RENDEZVOUS_SECRET", "s3"}});
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.store_prefix(), "mnist/3");
  EXPECT_EQ(e.topology_block, "rack-a");
  EXPECT_EQ(e.secret, "s3");
}

void expect_invalid(const std::map<std::string, std::string>& vars, const std::string& needle) {
  try {
    rank_env_from(vars);
    FAIL() << "expected InvalidArgument mentioning " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RankEnv, ErrorsNameTheVariable) {
  expect_invalid({{"WORLD_SIZE", "two"}}, "WORLD_SIZE");
  expect_invalid({{"WORLD_SIZE", "2"}, {"RANK", "2"}}, "RANK: must be below WORLD_SIZE");
  expect_invalid({{"MASTER_PORT", "70000"}}, "MASTER_PORT");
  expect_invalid({{"LOCAL_WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}}, "LOCAL_RANK");
  expect_invalid({{"TORUS_RENDEZVOUS_SECRET_FILE", "/nonexistent/secret"}}, "TORUS_RENDEZVOUS_SECRET_FILE");
  expect_invalid({{"TORUS_JOB_NAME", "a/b"}}, "TORUS_JOB_NAME");
  expect_invalid({{"TORUS_RUN_ID", "../other"}}, "TORUS_RUN_ID");
}

TEST(RankEnv, ReadsTheSecretFromAFile) {
  const std::string path = ::testing::TempDir() + "/torus_secret";
  std::ofstream(path) << "from-file\n";
  EXPECT_EQ(rank_env_from({{"TORUS_RENDEZVOUS_SECRET_FILE", path}}).secret, "from-file");
  std::remove(path.c_str());
}

// The node -> block map the operator mounts (TORUS_TOPOLOGY_BLOCKS_FILE), written to a temporary file.
std::string write_blocks_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(RankEnv, LooksUpTheNodesBlockInTheBlocksFile) {
  const std::string path = write_blocks_file("torus_blocks.json", R"({"node-0": "rack-0", "node-1": "rack-1"})");
  struct Case {
    std::map<std::string, std::string> vars;
    std::string block;
  };
  const std::vector<Case> cases = {
      {{{"TORUS_NODE_NAME", "node-1"}, {"TORUS_TOPOLOGY_BLOCKS_FILE", path}}, "rack-1"},
      {{{"TORUS_NODE_NAME", "node-0"}, {"TORUS_TOPOLOGY_BLOCKS_FILE", path}}, "rack-0"},
      // Labelled after the map was written: no block (a warning), not an error.
      {{{"TORUS_NODE_NAME", "node-9"}, {"TORUS_TOPOLOGY_BLOCKS_FILE", path}, {"TORUS_TOPOLOGY_KEY", "rack"}}, ""},
      // An explicit block wins over the map.
      {{{"TORUS_NODE_NAME", "node-1"}, {"TORUS_TOPOLOGY_BLOCKS_FILE", path}, {"TORUS_TOPOLOGY_BLOCK", "mine"}}, "mine"},
      {{{"TORUS_NODE_NAME", "node-1"}}, ""},
  };
  for (const auto& c : cases) {
    RankEnv e = rank_env_from(c.vars);
    EXPECT_EQ(e.topology_block, c.block) << c.vars.at("TORUS_NODE_NAME");
  }
  EXPECT_EQ(rank_env_from({{"TORUS_TOPOLOGY_KEY", "topology.torus.dev/rack"}}).topology_key, "topology.torus.dev/rack");
  std::remove(path.c_str());
}

TEST(RankEnv, MalformedBlocksFileIsAnErrorNamingIt) {
  for (const std::string text : {"{not json", R"(["node-0"])", R"({"node-0": 3})"}) {
    const std::string path = write_blocks_file("torus_bad_blocks.json", text);
    try {
      rank_env_from({{"TORUS_NODE_NAME", "node-0"}, {"TORUS_TOPOLOGY_BLOCKS_FILE", path}});
      FAIL() << "accepted " << text;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  }
  expect_invalid({{"TORUS_TOPOLOGY_BLOCKS_FILE", "/nonexistent/blocks.json"}}, "/nonexistent/blocks.json");
}

RankEnv sample() {
  RankEnv e;
  e.job_name = "mnist";
  e.ns = "team-a";
  e.attempt = 2;
  e.world_size = 8;
  e.job_file = "/etc/torus/job/job.json";
  e.master_addr = "mnist-worker-0.mnist.team-a.svc";
  e.master_port = 29511;
  e.secret = "s3";
  e.rank = 5;
  e.local_rank = 1;
  e.local_world_size = 4;
  e.node_rank = 1;
  e.node_name = "node-3";
  e.bind_address = "127.0.0.7";
  e.metrics_port = api::kDefaultMetricsPort;
  e.topology_key = "topology.torus.dev/rack";
  e.resume_step = 120;
  e.run_id = "0d4b1c2e-8f3a-4e5b-9c6d-7e8f9a0b1c2d";
  return e;
}

void expect_same(const RankEnv& a, const RankEnv& b) {
  EXPECT_EQ(to_env(a, Target::kProcess), to_env(b, Target::kProcess));
}

TEST(RankEnv, WhatTheWriterWritesTheReaderReadsBack) {
  const RankEnv e = sample();
  const RankEnv back = rank_env_from(to_process_env(e));
  expect_same(back, e);
  EXPECT_EQ(back.launch, Launch::kRank);
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.ns, "team-a");
  EXPECT_EQ(back.job_file, "/etc/torus/job/job.json");
  EXPECT_EQ(back.bind_address, "127.0.0.7");
  EXPECT_EQ(back.metrics_port, api::kDefaultMetricsPort);
  EXPECT_EQ(back.resume_step, 120) << "TORUS_RESUME_STEP: the checkpoint the attempt must resume from";
  EXPECT_EQ(back.run_id, "0d4b1c2e-8f3a-4e5b-9c6d-7e8f9a0b1c2d") << "TORUS_RUN_ID: whose checkpoints are the run's own";
}

TEST(RankEnv, MissingVariablesTakeTheDocumentedDefaults) {
  const RankEnv e = rank_env_from({});
  EXPECT_EQ(e.launch, Launch::kRank);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.attempt, 0);  // attempts are 0-based everywhere
  EXPECT_EQ(e.job_name, "torus");
  EXPECT_EQ(e.ns, "default");
  EXPECT_FALSE(e.metrics_port.has_value());
  EXPECT_FALSE(e.resume_step.has_value()) << "no checkpoint to insist on";
  EXPECT_EQ(e.run_id, "") << "no run: the checkpoint folder itself";
  EXPECT_TRUE(e.bind_address.empty());
}

TEST(RankEnv, PodTargetTakesNodeAndAddressFromTheDownwardApi) {
  std::map<std::string, std::string> fields;
  for (const EnvVar& v : to_env(sample(), Target::kPod)) {
    if (!v.field_path.empty()) fields[v.name] = v.field_path;
  }
  EXPECT_EQ(fields, (std::map<std::string, std::string>{{"TORUS_NODE_NAME", "spec.nodeName"},
                                                        {"TORUS_BIND_ADDRESS", "status.podIP"}}));
}

TEST(RankEnv, SecretFileIsWrittenAsTheFileAndReadAsItsContent) {
  const std::string path = ::testing::TempDir() + "/torus_written_secret";
  std::ofstream(path) << "in-file\n";
  RankEnv e = sample();
  e.secret_file = path;
  const auto vars = to_process_env(e);
  EXPECT_EQ(vars.count("TORUS_RENDEZVOUS_SECRET"), 0u);
  const RankEnv back = rank_env_from(vars);
  EXPECT_EQ(back.secret, "in-file");
  EXPECT_EQ(back.secret_file, path);
  std::remove(path.c_str());
}

TEST(RankEnv, APodOfSeveralProcessesNamesNoRankAndItsLocalRanksFollowTheNodeRank) {
  RankEnv pod = sample();
  pod.launch = Launch::kLocalRanks;
  pod.node_rank = 1;
  pod.local_world_size = 4;
  const auto vars = to_process_env(pod);
  EXPECT_EQ(vars.count("RANK"), 0u);
  EXPECT_EQ(vars.count("LOCAL_RANK"), 0u);
  const RankEnv back = rank_env_from(vars);
  ASSERT_EQ(back.launch, Launch::kLocalRanks);
  for (int local = 0; local < 4; ++local) {
    const RankEnv r = rank_env_from(to_process_env(local_rank_env(back, local)));
    EXPECT_EQ(r.launch, Launch::kRank);
    EXPECT_EQ(r.rank, 4 + local);
    EXPECT_EQ(r.local_rank, local);
    EXPECT_EQ(r.node_rank, 1);
    EXPECT_EQ(r.metrics_port, api::kDefaultMetricsPort + local);
  }
  EXPECT_THROW(local_rank_env(back, 4), InvalidArgument);
  EXPECT_THROW(local_rank_env(sample(), 0), InvalidArgument);
}

TEST(RankEnv, LocalRanksMustFitTheWorld) {
  expect_invalid({{"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"NODE_RANK", "2"}}, "NODE_RANK");
  expect_invalid({{"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, "LOCAL_RANK");
  expect_invalid({{"TORUS_METRICS_PORT", "70000"}}, "TORUS_METRICS_PORT");
}

}  // namespace
}  // namespace torus::launch

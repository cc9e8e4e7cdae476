#pragma once
// The rank environment, the same in pods and in the local runner, parsed in one place with errors that name the
// variable: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, TORUS_ATTEMPT,
// TORUS_JOB_NAME, TORUS_NODE_NAME, TORUS_TOPOLOGY_BLOCK (else looked up in TORUS_TOPOLOGY_BLOCKS_FILE, the
// node -> block map the operator writes for TORUS_TOPOLOGY_KEY), TORUS_TOPOLOGY_FILE, and the secret
// (TORUS_RENDEZVOUS_SECRET or TORUS_RENDEZVOUS_SECRET_FILE).
#include <map>
#include <optional>
#include <string>

namespace torus::comm {

struct RankEnv {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int attempt = 0;
  std::string job_name = "torus";
  std::string node_name;       // defaults to the host name
  std::string topology_block;  // optional rack / switch label
  std::string topology_key;    // the node label the block map was built from (for messages)
  std::optional<std::string> topology_blocks_file;
  std::optional<std::string> topology_file;
  std::string secret;

  // "<job>/<attempt>": the prefix of every store key of this gang incarnation.
  std::string store_prefix() const { return job_name + "/" + std::to_string(attempt); }
};

// Reads the process environment. Throws InvalidArgument naming the variable and what was expected.
RankEnv rank_env_from_environment();
// `node`'s block in the node -> block map at `path` (a JSON object of strings, as the operator writes it). A node
// missing from the map (labelled after the map was written) gets "" and one warning naming it and `key`; an
// unreadable or malformed file throws InvalidArgument naming it.
std::string block_from_file(const std::string& path, const std::string& node, const std::string& key);
// Same, from an explicit map (tests, and the local runner building a child's environment).
RankEnv rank_env_from(const std::map<std::string, std::string>& vars);

}  // namespace torus::comm

#include "worker/comm/rank_env.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::comm {

namespace {

using Vars = std::map<std::string, std::string>;

std::optional<std::string> lookup(const Vars& vars, const std::string& name) {
  auto it = vars.find(name);
  if (it == vars.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

int parse_int(const Vars& vars, const std::string& name, int fallback, int min_value) {
  auto v = lookup(vars, name);
  if (!v) return fallback;
  size_t pos = 0;
  long long x = 0;
  try {
    x = std::stoll(*v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != v->size() || x < min_value || x > (1 << 30))
    throw InvalidArgument(name + ": expected an integer >= " + std::to_string(min_value) + ", got '" + *v + "'");
  return static_cast<int>(x);
}

void require_below(const std::string& name, int value, const std::string& bound_name, int bound) {
  if (value >= bound)
    throw InvalidArgument(name + ": must be below " + bound_name + " (" + std::to_string(bound) + "), got " +
                          std::to_string(value));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("TORUS_RENDEZVOUS_SECRET_FILE: cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) throw InvalidArgument("TORUS_RENDEZVOUS_SECRET_FILE: '" + path + "' is empty");
  return s;
}

void require_key_safe(const std::string& name, const std::string& value) {
  if (value.find('/') != std::string::npos) throw InvalidArgument(name + ": must not contain '/', got '" + value + "'");
}

}  // namespace

std::string block_from_file(const std::string& path, const std::string& node, const std::string& key) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("TORUS_TOPOLOGY_BLOCKS_FILE: cannot read '" + path + "'");
  nlohmann::json map;
  try {
    map = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(path + ": not valid JSON: " + e.what());
  }
  if (!map.is_object()) throw InvalidArgument(path + ": expected an object mapping node names to blocks");
  for (const auto& [name, block] : map.items()) {
    if (!block.is_string())
      throw InvalidArgument(path + ": node '" + name + "': expected a string block, got " + block.dump());
  }
  auto it = map.find(node);
  if (it == map.end()) {
    TLOG(Warn) << "topology: node '" << node << "' is not in " << path << " (no label '" << key
               << "' when the map was written): this rank's block is empty, so rack ordering may be off";
    return "";
  }
  return it->get<std::string>();
}

RankEnv rank_env_from(const Vars& vars) {
  RankEnv e;
  e.world_size = parse_int(vars, "WORLD_SIZE", 1, 1);
  e.rank = parse_int(vars, "RANK", 0, 0);
  require_below("RANK", e.rank, "WORLD_SIZE", e.world_size);
  e.master_addr = lookup(vars, "MASTER_ADDR").value_or(e.master_addr);
  e.master_port = parse_int(vars, "MASTER_PORT", e.master_port, 1);
  if (e.master_port > 65535) throw InvalidArgument("MASTER_PORT: expected 1..65535, got " + vars.at("MASTER_PORT"));
  e.local_world_size = parse_int(vars, "LOCAL_WORLD_SIZE", e.world_size, 1);
  e.local_rank = parse_int(vars, "LOCAL_RANK", e.rank % e.local_world_size, 0);
  require_below("LOCAL_RANK", e.local_rank, "LOCAL_WORLD_SIZE", e.local_world_size);
  e.node_rank = parse_int(vars, "NODE_RANK", e.rank / e.local_world_size, 0);
  e.attempt = parse_int(vars, "TORUS_ATTEMPT", 0, 0);
  e.job_name = lookup(vars, "TORUS_JOB_NAME").value_or(e.job_name);
  require_key_safe("TORUS_JOB_NAME", e.job_name);
  e.node_name = lookup(vars, "TORUS_NODE_NAME").value_or(host_name());
  e.topology_block = lookup(vars, "TORUS_TOPOLOGY_BLOCK").value_or("");
  e.topology_key = lookup(vars, "TORUS_TOPOLOGY_KEY").value_or("");
  e.topology_blocks_file = lookup(vars, "TORUS_TOPOLOGY_BLOCKS_FILE");
  if (e.topology_block.empty() && e.topology_blocks_file) {
    e.topology_block = block_from_file(*e.topology_blocks_file, e.node_name, e.topology_key);
  }
  e.topology_file = lookup(vars, "TORUS_TOPOLOGY_FILE");
  if (auto s = lookup(vars, "TORUS_RENDEZVOUS_SECRET")) {
    e.secret = *s;
  } else if (auto path = lookup(vars, "TORUS_RENDEZVOUS_SECRET_FILE")) {
    e.secret = read_secret_file(*path);
  }
  return e;
}

RankEnv rank_env_from_environment() {
  static const char* const kNames[] = {"MASTER_ADDR",
                                       "MASTER_PORT",
                                       "WORLD_SIZE",
                                       "RANK",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "NODE_RANK",
                                       "TORUS_ATTEMPT",
                                       "TORUS_JOB_NAME",
                                       "TORUS_NODE_NAME",
                                       "TORUS_TOPOLOGY_BLOCK",
                                       "TORUS_TOPOLOGY_KEY",
                                       "TORUS_TOPOLOGY_BLOCKS_FILE",
                                       "TORUS_TOPOLOGY_FILE",
                                       "TORUS_RENDEZVOUS_SECRET",
                                       "TORUS_RENDEZVOUS_SECRET_FILE"};
  Vars vars;
  for (const char* name : kNames) {
    if (const char* v = std::getenv(name)) vars[name] = v;
  }
  return rank_env_from(vars);
}

}  // namespace torus::comm

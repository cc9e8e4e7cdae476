#include "common/launch/rank_env.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/launch/checkpoint_layout.h"
#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::launch {

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

namespace {

// Port-like values: 1..65535, or 0..65535 where 0 means "any free port".
int parse_port(const Vars& vars, const std::string& name, int fallback, int min_value) {
  const int port = parse_int(vars, name, fallback, min_value);
  if (port > 65535)
    throw InvalidArgument(name + ": expected " + std::to_string(min_value) + "..65535, got " + std::to_string(port));
  return port;
}

void read_rank(const Vars& vars, RankEnv& e) {
  e.world_size = parse_int(vars, "WORLD_SIZE", 1, 1);
  e.local_world_size = parse_int(vars, "LOCAL_WORLD_SIZE", e.world_size, 1);
  if (!lookup(vars, "RANK") && lookup(vars, "LOCAL_WORLD_SIZE") && e.local_world_size > 1) {
    if (lookup(vars, "LOCAL_RANK"))
      throw InvalidArgument("LOCAL_RANK: set without RANK; a pod of LOCAL_WORLD_SIZE ranks gets neither");
    e.launch = Launch::kLocalRanks;
    e.node_rank = parse_int(vars, "NODE_RANK", 0, 0);
    e.rank = e.node_rank * e.local_world_size;
    if (e.rank + e.local_world_size > e.world_size)
      throw InvalidArgument("NODE_RANK: " + std::to_string(e.node_rank) + " x LOCAL_WORLD_SIZE " +
                            std::to_string(e.local_world_size) + " local ranks do not fit in WORLD_SIZE " +
                            std::to_string(e.world_size));
    return;
  }
  e.rank = parse_int(vars, "RANK", 0, 0);
  require_below("RANK", e.rank, "WORLD_SIZE", e.world_size);
  e.local_rank = parse_int(vars, "LOCAL_RANK", e.rank % e.local_world_size, 0);
  require_below("LOCAL_RANK", e.local_rank, "LOCAL_WORLD_SIZE", e.local_world_size);
  e.node_rank = parse_int(vars, "NODE_RANK", e.rank / e.local_world_size, 0);
}

void read_topology(const Vars& vars, RankEnv& e) {
  e.topology_block = lookup(vars, "TORUS_TOPOLOGY_BLOCK").value_or("");
  e.topology_key = lookup(vars, "TORUS_TOPOLOGY_KEY").value_or("");
  e.topology_blocks_file = lookup(vars, "TORUS_TOPOLOGY_BLOCKS_FILE");
  if (e.topology_block.empty() && e.topology_blocks_file) {
    e.topology_block = block_from_file(*e.topology_blocks_file, e.node_name, e.topology_key);
  }
  e.topology_file = lookup(vars, "TORUS_TOPOLOGY_FILE");
}

void put(std::vector<EnvVar>& out, const std::string& name, const std::string& value) {
  out.push_back({name, value, ""});
}

void put_optional(std::vector<EnvVar>& out, const std::string& name, const std::optional<std::string>& value) {
  if (value && !value->empty()) put(out, name, *value);
}

// A pod learns `field_path` from the downward API; a process gets the value.
void put_host_value(std::vector<EnvVar>& out, Target target, const std::string& name, const std::string& value,
                    const std::string& field_path) {
  if (target == Target::kPod) {
    out.push_back({name, "", field_path});
  } else if (!value.empty()) {
    put(out, name, value);
  }
}

}  // namespace

std::vector<EnvVar> to_env(const RankEnv& e, Target target) {
  std::vector<EnvVar> out;
  put(out, "MASTER_ADDR", e.master_addr);
  put(out, "MASTER_PORT", std::to_string(e.master_port));
  put(out, "WORLD_SIZE", std::to_string(e.world_size));
  if (e.launch == Launch::kRank) {
    put(out, "RANK", std::to_string(e.rank));
    put(out, "LOCAL_RANK", std::to_string(e.local_rank));
  }
  put(out, "LOCAL_WORLD_SIZE", std::to_string(e.local_world_size));
  put(out, "NODE_RANK", std::to_string(e.node_rank));
  put(out, "TORUS_ATTEMPT", std::to_string(e.attempt));
  put(out, "TORUS_JOB_NAME", e.job_name);
  put(out, "TORUS_NAMESPACE", e.ns);
  put_optional(out, "TORUS_JOB_FILE", e.job_file);
  put_optional(out, "TORUS_RUN_ID", e.run_id);
  put_host_value(out, target, "TORUS_NODE_NAME", e.node_name, "spec.nodeName");
  put_host_value(out, target, "TORUS_BIND_ADDRESS", e.bind_address, "status.podIP");
  if (e.metrics_port) put(out, "TORUS_METRICS_PORT", std::to_string(*e.metrics_port));
  if (e.resume_step) put(out, "TORUS_RESUME_STEP", std::to_string(*e.resume_step));
  if (e.secret_file) {
    put(out, "TORUS_RENDEZVOUS_SECRET_FILE", *e.secret_file);
  } else {
    put_optional(out, "TORUS_RENDEZVOUS_SECRET", e.secret);
  }
  put_optional(out, "TORUS_TOPOLOGY_BLOCK", e.topology_block);
  put_optional(out, "TORUS_TOPOLOGY_KEY", e.topology_key);
  put_optional(out, "TORUS_TOPOLOGY_BLOCKS_FILE", e.topology_blocks_file);
  put_optional(out, "TORUS_TOPOLOGY_FILE", e.topology_file);
  return out;
}

std::map<std::string, std::string> to_process_env(const RankEnv& env) {
  std::map<std::string, std::string> out;
  for (const EnvVar& v : to_env(env, Target::kProcess)) out[v.name] = v.value;
  return out;
}

RankEnv rank_env_from(const Vars& vars) {
  RankEnv e;
  read_rank(vars, e);
  e.master_addr = lookup(vars, "MASTER_ADDR").value_or(e.master_addr);
  e.master_port = parse_port(vars, "MASTER_PORT", e.master_port, 1);
  e.attempt = parse_int(vars, "TORUS_ATTEMPT", 0, 0);
  e.job_name = lookup(vars, "TORUS_JOB_NAME").value_or(e.job_name);
  require_key_safe("TORUS_JOB_NAME", e.job_name);
  e.ns = lookup(vars, "TORUS_NAMESPACE").value_or(e.ns);
  e.job_file = lookup(vars, "TORUS_JOB_FILE").value_or("");
  e.run_id = lookup(vars, "TORUS_RUN_ID").value_or("");
  if (!e.run_id.empty()) {
    if (const std::string problem = run_id_problem(e.run_id); !problem.empty())
      throw InvalidArgument("TORUS_RUN_ID: " + problem + ", got '" + e.run_id + "'");
  }
  e.node_name = lookup(vars, "TORUS_NODE_NAME").value_or(host_name());
  e.bind_address = lookup(vars, "TORUS_BIND_ADDRESS").value_or("");
  if (lookup(vars, "TORUS_METRICS_PORT")) e.metrics_port = parse_port(vars, "TORUS_METRICS_PORT", 0, 0);
  if (lookup(vars, "TORUS_RESUME_STEP")) e.resume_step = parse_int(vars, "TORUS_RESUME_STEP", 0, 0);
  read_topology(vars, e);
  if (auto s = lookup(vars, "TORUS_RENDEZVOUS_SECRET")) {
    e.secret = *s;
  } else if (auto path = lookup(vars, "TORUS_RENDEZVOUS_SECRET_FILE")) {
    e.secret = read_secret_file(*path);
    e.secret_file = *path;
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
                                       "TORUS_NAMESPACE",
                                       "TORUS_JOB_FILE",
                                       "TORUS_RUN_ID",
                                       "TORUS_NODE_NAME",
                                       "TORUS_BIND_ADDRESS",
                                       "TORUS_METRICS_PORT",
                                       "TORUS_RESUME_STEP",
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

RankEnv local_rank_env(const RankEnv& pod, int local_rank) {
  if (pod.launch != Launch::kLocalRanks)
    throw InvalidArgument("local rank " + std::to_string(local_rank) + ": this environment is one rank (RANK " +
                          std::to_string(pod.rank) + "), not a pod of local ranks");
  if (local_rank < 0 || local_rank >= pod.local_world_size)
    throw InvalidArgument("local rank " + std::to_string(local_rank) + ": expected 0.." +
                          std::to_string(pod.local_world_size - 1));
  RankEnv e = pod;
  e.launch = Launch::kRank;
  e.local_rank = local_rank;
  e.rank = pod.node_rank * pod.local_world_size + local_rank;
  if (pod.metrics_port && *pod.metrics_port != 0) e.metrics_port = *pod.metrics_port + local_rank;
  return e;
}

}  // namespace torus::launch

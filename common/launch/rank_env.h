#pragma once
// The launch contract: how a launcher tells `torus-worker` which rank it is. Both launchers write it with
// to_env() (the operator into worker pod specs, `torus run` into process environments, and the in-pod supervisor
// of a multi-process pod into its local ranks' environments); every part of the worker reads it once, with
// rank_env_from_environment(). See docs/architecture.md, "The launch contract".
//
// The variables (all optional when read; missing ones take the defaults below):
//   MASTER_ADDR, MASTER_PORT          rank 0's rendezvous store
//   WORLD_SIZE                        ranks in the gang (workers x processesPerWorker)
//   RANK, LOCAL_RANK                  this rank; both absent with LOCAL_WORLD_SIZE > 1: a pod that starts its
//                                     LOCAL_WORLD_SIZE local ranks (ranks NODE_RANK x LOCAL_WORLD_SIZE + local)
//   LOCAL_WORLD_SIZE, NODE_RANK       ranks per host and the host's index (a pod's worker index)
//   TORUS_ATTEMPT                     the gang's attempt, 0-based (0 = first start, 1 = first restart)
//   TORUS_JOB_NAME, TORUS_NAMESPACE   the job (store keys live under "<job>/<attempt>/")
//   TORUS_JOB_FILE                    the resolved job file (read when `--job` is not given)
//   TORUS_RUN_ID                      the run: the TrainingJob's uid, or one `torus run` invocation's id; the run's
//                                     checkpoints live in a folder of their own (checkpoint_layout.h); unset: the
//                                     checkpoint folder itself
//   TORUS_NODE_NAME                   the host (pods: downward API spec.nodeName); ranks on one host share memory
//   TORUS_BIND_ADDRESS                the address this rank's servers bind: rendezvous store, Gloo, /metrics
//                                     (pods: downward API status.podIP; empty: any address)
//   TORUS_METRICS_PORT                /metrics port (0: any free port; local rank k of a pod: port + k)
//   TORUS_RESUME_STEP                 the step of the last checkpoint the launcher saw written (the operator's
//                                     status.lastCheckpoint): the run must resume from a checkpoint, and fails with
//                                     CheckpointLost (exit 44) when it finds none, instead of starting at step 0
//   TORUS_RENDEZVOUS_SECRET or TORUS_RENDEZVOUS_SECRET_FILE   the per-job store secret
//   TORUS_TOPOLOGY_BLOCK, or TORUS_TOPOLOGY_BLOCKS_FILE (the node -> block map the operator writes for
//   TORUS_TOPOLOGY_KEY), TORUS_TOPOLOGY_FILE                  the rack layout
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/api/defaults.h"

namespace torus::launch {

// What the environment asks one process to run.
enum class Launch {
  kRank,        // one rank (RANK is set)
  kLocalRanks,  // a pod of several processes: start LOCAL_WORLD_SIZE local ranks (RANK is not set)
};

struct RankEnv {
  // The gang.
  std::string job_name = "torus";
  std::string ns = "default";
  int attempt = 0;  // 0-based
  int world_size = 1;
  std::string job_file;
  std::string run_id;  // TORUS_RUN_ID: launch::run_id_problem() is empty for it, or it is empty
  std::string master_addr = "127.0.0.1";
  int master_port = api::kDefaultRendezvousPort;
  std::string secret;                      // the secret itself (read from secret_file when that is set)
  std::optional<std::string> secret_file;  // where the secret came from (pods: the mounted Secret)
  // This process.
  Launch launch = Launch::kRank;
  int rank = 0;  // kLocalRanks: the first local rank's
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string node_name;  // defaults to the host name
  std::string bind_address;
  std::optional<int> metrics_port;
  std::optional<int64_t> resume_step;  // TORUS_RESUME_STEP
  std::string topology_block;  // optional rack / switch label
  std::string topology_key;    // the node label the block map was built from (for messages)
  std::optional<std::string> topology_blocks_file;
  std::optional<std::string> topology_file;

  // "<job>/<attempt>": the prefix of every store key of this gang incarnation.
  std::string store_prefix() const { return job_name + "/" + std::to_string(attempt); }
};

// One variable as a launcher writes it: a value, or (pods) a downward API field the kubelet fills in.
struct EnvVar {
  std::string name;
  std::string value;
  std::string field_path;  // non-empty: valueFrom.fieldRef.fieldPath
  bool operator==(const EnvVar&) const = default;
};

// Where the environment goes: a process (every value literal), or a pod spec (the node name and the bind address
// come from the downward API: spec.nodeName, status.podIP).
enum class Target { kProcess, kPod };

// The one writer. Unset optional fields are left out; RANK and LOCAL_RANK only for Launch::kRank.
std::vector<EnvVar> to_env(const RankEnv& env, Target target);
// to_env(env, kProcess) as a name -> value map (what common/process/supervisor.h takes).
std::map<std::string, std::string> to_process_env(const RankEnv& env);

// The one reader. Throws InvalidArgument naming the variable and what was expected.
RankEnv rank_env_from_environment();
// Same, from an explicit map (tests, and launchers checking what they wrote).
RankEnv rank_env_from(const std::map<std::string, std::string>& vars);

// Local rank `local_rank` of a Launch::kLocalRanks environment: rank = node_rank x local_world_size + local_rank,
// its own metrics port (metrics_port + local_rank; 0 stays 0). Throws InvalidArgument when out of range.
RankEnv local_rank_env(const RankEnv& pod, int local_rank);

// `node`'s block in the node -> block map at `path` (a JSON object of strings, as the operator writes it). A node
// missing from the map (labelled after the map was written) gets "" and one warning naming it and `key`; an
// unreadable or malformed file throws InvalidArgument naming it.
std::string block_from_file(const std::string& path, const std::string& node, const std::string& key);

}  // namespace torus::launch

#pragma once
// `torus run FILE`: the same TrainingJob file `kubectl apply` takes, run here as local worker processes with the
// same rank environment, rendezvous, checkpoints, gang restarts and metrics as in pods.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api/field_error.h"
#include "common/api/source_map.h"
#include "common/api/training_job.h"
#include "common/launch/rank_env.h"
#include "operator/controller/gang_policy.h"

namespace torus::runtime {

enum class Verbosity { kRankZero, kAllRanks };
// --resume: the run starts from the newest checkpoint another run left (spec.training.checkpoint.resumeFrom: latest).
enum class Resume { kNo, kLatest };

struct LocalRunOptions {
  std::string job_file;
  std::optional<int> workers;     // --workers N: overrides spec.gang.workers
  std::vector<std::string> sets;  // --set path=value (YAML scalar or flow value), applied in order
  Verbosity verbosity = Verbosity::kRankZero;
  Resume resume = Resume::kNo;
  std::string worker_binary;  // empty: torus-worker next to this executable, or $TORUS_WORKER_BINARY
  std::string log_dir;        // --log-dir: where rank-N.log go; empty: a new folder under $TMPDIR/torus-logs
};

// Applies `path=value` to a JSON document: dotted keys with [i] list indices ("spec.training.epochs=3",
// "spec.training.phases[0].imageSize=128"); the value is read as YAML ("true", "0.1", "[8, 16]", "text").
// Errors name the --set argument and what was wrong. With `sources` (where the file's fields were written), the
// path is recorded as coming from "--set PATH", so that errors about the value name the flag instead of a line.
void apply_set(nlohmann::json& document, const std::string& assignment, api::FieldErrors& errors,
               api::SourceMap* sources = nullptr);

// Reads, overrides, defaults and validates the job: the job to run, or every error (nothing is started). A job whose
// spec.runPolicy.managedBy names another controller is an error: that controller runs it.
struct LoadedJob {
  api::TrainingJob job;
  api::FieldErrors errors;
  std::vector<std::string> not_applied;  // the operator-only fields the job as written sets (api/field_scope.h)
};
LoadedJob load_local_job(const LocalRunOptions& options);

// What the ranks of one local attempt share.
struct LocalGang {
  std::string job_file;   // the resolved job (the local analogue of the operator's ConfigMap)
  std::string node_name;  // this host
  int master_port = 0;    // rank 0's store, a free port per attempt
  std::string secret;     // the run's rendezvous secret
  std::string run_id;     // this invocation's run (new_local_run_id)
};
// The launch contract's rank environment of `rank` in `attempt` (common/launch/rank_env.h): every rank is a local
// rank of this one host, served on loopback.
launch::RankEnv torus_run_rank_env(const api::TrainingJob& job, int rank, int attempt, const LocalGang& gang);

// A new run id for one `torus run` invocation: its start time and a random suffix, "20260314-101502-3fa2" (sorts
// by time; launch::run_id_problem() is empty for it).
std::string new_local_run_id();

// Runs the job; prints progress and the summary (last line `RESULT ...`) and returns the process exit code:
// 0 Succeeded, or a suspended job (runPolicy.suspend: nothing is started), 1 Failed or invalid, 130 interrupted
// (Suspended: run again with --resume to continue from the checkpoint).
int run_local(const LocalRunOptions& options);

}  // namespace torus::runtime

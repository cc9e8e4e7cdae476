#pragma once
// Where a run's checkpoints live, for every writer and reader: the worker writes and finds them (worker/checkpoint),
// the operator names them in status.lastCheckpoint and status.resumedFrom, `torus run` names them on its console.
//
// A run is one identity of training: a TrainingJob (its metadata.uid: the job's restarts, resumes and edits are the
// same run) or one `torus run` invocation (a new id each time). The launcher tells the worker its run in TORUS_RUN_ID
// (rank_env.h). Each run keeps its checkpoints in a folder of its own under spec.training.checkpoint.dir, so a new run
// neither resumes nor prunes another run's checkpoints, unless spec.training.checkpoint.resumeFrom asks it to start
// from one:
//   <dir>/<run>/ckpt-<step>.torus
//   <dir>/ckpt-<step>.torus          run "": a worker started without a run id (tests, `torus-worker --job`), and
//                                    checkpoints written before runs had ids
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace torus::launch {

// <dir>/<run>, or <dir> itself for run "".
std::string run_checkpoint_dir(const std::string& dir, const std::string& run);
// "ckpt-<step>.torus".
std::string checkpoint_file_name(int64_t step);
// <dir>/<run>/ckpt-<step>.torus.
std::string checkpoint_path(const std::string& dir, const std::string& run, int64_t step);
// The step of a file named ckpt-<step>.torus, or nothing for any other name.
std::optional<int64_t> step_of_checkpoint_file(std::string_view name);
// A writer's temp file (ckpt-<step>.torus.tmp-...), left behind when it crashed.
bool is_checkpoint_temp_file(std::string_view name);

// spec.training.checkpoint.resumeFrom: "latest" (the newest checkpoint of any other run in the folder) or a run id.
inline constexpr std::string_view kResumeLatest = "latest";

// A run id is a folder name: 1-63 of [A-Za-z0-9._-], starting with a letter or digit, and not "latest". Returns what
// is wrong with `id` ("" when it is a valid id).
std::string run_id_problem(std::string_view id);

// Why an attempt starts where it does: the status's resumedFrom.reason, the worker's started event and metrics.
enum class ResumeReason {
  kFresh,       // step 0: this run has no checkpoint yet, and resumeFrom names none
  kThisRun,     // this run's newest checkpoint: a restart, a resume after suspend, an edit
  kResumeFrom,  // another run's newest checkpoint, as spec.training.checkpoint.resumeFrom asks
};
std::string_view to_string(ResumeReason reason);  // "Fresh", "ThisRun", "ResumeFrom"
std::optional<ResumeReason> resume_reason_from_string(std::string_view text);

}  // namespace torus::launch

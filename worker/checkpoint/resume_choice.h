#pragma once
// Which checkpoint a run starts from (common/launch/checkpoint_layout.h: each run's checkpoints in a folder of its
// own): its own newest valid one (a restart of the same run), else the one spec.training.checkpoint.resumeFrom names
// (another run's newest valid one), else none: step 0. Rank 0 chooses; the trainer restores and shares the state.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/launch/checkpoint_layout.h"
#include "worker/checkpoint/checkpoint_dir.h"

namespace torus::worker::checkpoint {

// A run's checkpoints in the folder, as file names say (not verified).
struct RunCheckpoints {
  std::string run;  // "" for the files in the folder itself
  int64_t newest_step = 0;
  std::string newest_path;
  std::filesystem::file_time_type written{};  // the newest file's modification time
};

// Every run with checkpoint files under `dir`, the most recently written first. Empty when `dir` does not exist.
std::vector<RunCheckpoints> runs_in(const std::string& dir);

struct ResumeChoice {
  launch::ResumeReason reason = launch::ResumeReason::kFresh;
  std::string from_run;                    // the run whose checkpoint `found` is (unless kFresh)
  std::optional<FoundCheckpoint> found;    // verified; set unless kFresh
  std::vector<RunCheckpoints> other_runs;  // kFresh: the other runs' checkpoints in the folder, newest first
};

// Looks in dir/run first, then (when it holds no valid checkpoint) where `resume_from` says: "latest" is the most
// recently written run folder other than `run` that holds a valid checkpoint, anything else a run id. Throws
// InvalidArgument naming spec.training.checkpoint.resumeFrom when that names no run with a valid checkpoint, and
// naming the file when a checkpoint in dir/run was written by another run (it was moved there by hand).
ResumeChoice choose_resume(const std::string& dir, const std::string& run, const std::string& resume_from, int keep);

// The run a checkpoint's metadata names ("" when written before runs had ids).
std::string run_of(const CheckpointReader& reader);
inline constexpr const char* kRunMetadataKey = "run";

}  // namespace torus::worker::checkpoint

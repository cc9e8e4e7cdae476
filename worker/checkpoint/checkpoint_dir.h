#pragma once
// A folder of checkpoints named ckpt-<step>.torus: write the next one, find the newest one that verifies, keep
// the last K.
//
//   CheckpointDir dir("/ckpt", /*keep_last=*/3);
//   dir.save(step, writer);                        // atomic commit, then delete all but the newest 3
//   if (auto latest = dir.latest_valid()) {        // newest first; a corrupt one is logged, recorded and skipped
//     CheckpointReader& r = *latest->reader; ...
//   }
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint.h"

namespace torus::worker::checkpoint {

struct FoundCheckpoint {
  int64_t step = 0;
  std::string path;
  std::unique_ptr<CheckpointReader> reader;  // already verified
};

struct SkippedCheckpoint {
  int64_t step = 0;
  std::string path;
  std::string reason;  // the CorruptData message
};

class CheckpointDir {
 public:
  // Creates the folder if missing. keep_last >= 1. Throws InvalidArgument otherwise.
  CheckpointDir(std::string dir, int keep_last);

  std::string path_for(int64_t step) const;
  // Steps of the files named ckpt-<step>.torus, ascending (unverified; temp files are ignored).
  std::vector<int64_t> steps() const;
  // Commits `writer` as ckpt-<step>.torus, then prunes.
  void save(int64_t step, const CheckpointWriter& writer) const;
  // The newest checkpoint that verifies; every newer, corrupt one is logged (warn) and appended to `skipped`.
  std::optional<FoundCheckpoint> latest_valid(std::vector<SkippedCheckpoint>* skipped = nullptr) const;
  // Deletes all but the newest keep_last checkpoints, and temp files left by crashed writers.
  void prune() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int keep_last_;
};

}  // namespace torus::worker::checkpoint

#include "worker/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>

#include "common/launch/checkpoint_layout.h"
#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::worker::checkpoint {

namespace fs = std::filesystem;

CheckpointDir::CheckpointDir(std::string dir, int keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last_ < 1) throw InvalidArgument("checkpoint keep_last: must be >= 1, got " + std::to_string(keep_last_));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw SystemError(dir_ + ": cannot create checkpoint folder: " + ec.message());
}

std::string CheckpointDir::path_for(int64_t step) const {
  return (fs::path(dir_) / launch::checkpoint_file_name(step)).string();
}

std::vector<int64_t> CheckpointDir::steps() const {
  std::vector<int64_t> found;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    if (auto step = launch::step_of_checkpoint_file(entry.path().filename().string())) found.push_back(*step);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void CheckpointDir::save(int64_t step, const CheckpointWriter& writer) const {
  writer.commit(path_for(step));
  prune();
}

std::optional<FoundCheckpoint> CheckpointDir::latest_valid(std::vector<SkippedCheckpoint>* skipped) const {
  const std::vector<int64_t> all = steps();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string path = path_for(*it);
    try {
      return FoundCheckpoint{*it, path, std::make_unique<CheckpointReader>(path)};
    } catch (const CorruptData& e) {
      TLOG(Warn) << "skipping corrupt checkpoint: " << e.what();
      if (skipped) skipped->push_back({*it, path, e.what()});
    }
  }
  return std::nullopt;
}

void CheckpointDir::prune() const {
  const std::vector<int64_t> all = steps();
  const size_t keep = static_cast<size_t>(keep_last_);
  for (size_t i = 0; i + keep < all.size(); ++i) {
    std::error_code ec;
    fs::remove(path_for(all[i]), ec);
    if (ec) {
      TLOG(Warn) << "cannot remove old checkpoint " << path_for(all[i]) << ": " << ec.message();
    }
  }
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    if (!launch::is_checkpoint_temp_file(name)) continue;
    std::error_code ec;
    fs::remove(entry.path(), ec);
  }
}

}  // namespace torus::worker::checkpoint

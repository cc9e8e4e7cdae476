#include "worker/checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::worker::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".torus";

// The step in "ckpt-<step>.torus", or nothing for any other name.
std::optional<int64_t> parse_step(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size() - kSuffix.size();
  int64_t step = 0;
  const auto [ptr, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || ptr != last || step < 0) return std::nullopt;
  return step;
}

bool is_stale_temp(const std::string& name) {
  return name.starts_with(kPrefix) && name.find(std::string(kSuffix) + ".tmp-") != std::string::npos;
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir, int keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last_ < 1) throw InvalidArgument("checkpoint keep_last: must be >= 1, got " + std::to_string(keep_last_));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw SystemError(dir_ + ": cannot create checkpoint folder: " + ec.message());
}

std::string CheckpointDir::path_for(int64_t step) const {
  return (fs::path(dir_) / (std::string(kPrefix) + std::to_string(step) + std::string(kSuffix))).string();
}

std::vector<int64_t> CheckpointDir::steps() const {
  std::vector<int64_t> found;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    if (auto step = parse_step(entry.path().filename().string())) found.push_back(*step);
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
    if (!is_stale_temp(name)) continue;
    std::error_code ec;
    fs::remove(entry.path(), ec);
  }
}

}  // namespace torus::worker::checkpoint

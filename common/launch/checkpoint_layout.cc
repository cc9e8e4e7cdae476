#include "common/launch/checkpoint_layout.h"

#include <charconv>

namespace torus::launch {
namespace {

constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".torus";
constexpr size_t kMaxRunId = 63;

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string run_checkpoint_dir(const std::string& dir, const std::string& run) {
  if (run.empty()) return dir;
  return dir + (dir.ends_with('/') ? "" : "/") + run;
}

std::string checkpoint_file_name(int64_t step) {
  return std::string(kPrefix) + std::to_string(step) + std::string(kSuffix);
}

std::string checkpoint_path(const std::string& dir, const std::string& run, int64_t step) {
  const std::string folder = run_checkpoint_dir(dir, run);
  return folder + (folder.ends_with('/') ? "" : "/") + checkpoint_file_name(step);
}

std::optional<int64_t> step_of_checkpoint_file(std::string_view name) {
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

bool is_checkpoint_temp_file(std::string_view name) {
  return name.starts_with(kPrefix) && name.find(std::string(kSuffix) + ".tmp-") != std::string_view::npos;
}

std::string run_id_problem(std::string_view id) {
  if (id.empty()) return "must not be empty";
  if (id.size() > kMaxRunId) return "must be at most " + std::to_string(kMaxRunId) + " characters";
  if (id == kResumeLatest) return "'latest' names no run (it is resumeFrom's word for the newest one)";
  if (id.front() == '.' || id.front() == '_' || id.front() == '-') return "must start with a letter or digit";
  for (char c : id) {
    if (!is_id_char(c)) return "may hold only letters, digits, '.', '_' and '-' (it is a folder name)";
  }
  return "";
}

std::string_view to_string(ResumeReason reason) {
  switch (reason) {
    case ResumeReason::kFresh:
      return "Fresh";
    case ResumeReason::kThisRun:
      return "ThisRun";
    case ResumeReason::kResumeFrom:
      return "ResumeFrom";
  }
  return "Fresh";
}

std::optional<ResumeReason> resume_reason_from_string(std::string_view text) {
  for (ResumeReason r : {ResumeReason::kFresh, ResumeReason::kThisRun, ResumeReason::kResumeFrom}) {
    if (to_string(r) == text) return r;
  }
  return std::nullopt;
}

}  // namespace torus::launch

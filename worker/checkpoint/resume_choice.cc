#include "worker/checkpoint/resume_choice.h"

#include <algorithm>

#include "common/util/error.h"

namespace torus::worker::checkpoint {
namespace {

namespace fs = std::filesystem;

// The newest ckpt-<step>.torus directly in `folder`, if any.
std::optional<RunCheckpoints> newest_in(const fs::path& folder, const std::string& run) {
  std::optional<RunCheckpoints> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const auto step = launch::step_of_checkpoint_file(entry.path().filename().string());
    if (!step || (out && *step <= out->newest_step)) continue;
    out = RunCheckpoints{run, *step, entry.path().string(), entry.last_write_time(ec)};
  }
  return out;
}

std::string names_of(const std::vector<RunCheckpoints>& runs) {
  std::string out;
  for (const RunCheckpoints& r : runs)
    out += (out.empty() ? "" : ", ") + (r.run.empty() ? "(the folder itself)" : r.run);
  return out.empty() ? "none" : out;
}

std::optional<FoundCheckpoint> newest_valid(const std::string& dir, const std::string& run, int keep) {
  const std::string folder = launch::run_checkpoint_dir(dir, run);
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return std::nullopt;
  return CheckpointDir(folder, keep).latest_valid();
}

// Another run's checkpoint, as resumeFrom names it.
ResumeChoice from_resume_from(const std::string& dir, const std::string& run, const std::string& resume_from, int keep,
                              const std::vector<RunCheckpoints>& others) {
  const std::string field = "spec.training.checkpoint.resumeFrom";
  ResumeChoice c;
  c.reason = launch::ResumeReason::kResumeFrom;
  if (resume_from == launch::kResumeLatest) {
    for (const RunCheckpoints& other : others) {
      if (auto found = newest_valid(dir, other.run, keep)) {
        c.from_run = other.run;
        c.found = std::move(found);
        return c;
      }
    }
    throw InvalidArgument(field + ": latest, but " + dir +
                          " holds no valid checkpoint of another run (runs there: " + names_of(others) + ")");
  }
  if (resume_from == run)
    throw InvalidArgument(field + ": " + resume_from + " is this run, which has no checkpoint in " + dir);
  auto found = newest_valid(dir, resume_from, keep);
  if (!found) {
    throw InvalidArgument(field + ": no valid checkpoint of run " + resume_from + " in " + dir +
                          " (runs there: " + names_of(others) + ")");
  }
  c.from_run = resume_from;
  c.found = std::move(found);
  return c;
}

}  // namespace

std::string run_of(const CheckpointReader& reader) {
  const auto it = reader.metadata().find(kRunMetadataKey);
  return it != reader.metadata().end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<RunCheckpoints> runs_in(const std::string& dir) {
  std::vector<RunCheckpoints> runs;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return runs;
  if (auto flat = newest_in(dir, "")) runs.push_back(*flat);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (auto r = newest_in(entry.path(), entry.path().filename().string())) runs.push_back(*r);
  }
  std::sort(runs.begin(), runs.end(), [](const RunCheckpoints& a, const RunCheckpoints& b) {
    return a.written != b.written ? a.written > b.written : a.run < b.run;
  });
  return runs;
}

ResumeChoice choose_resume(const std::string& dir, const std::string& run, const std::string& resume_from, int keep) {
  // Read without creating the run's folder: a run that never checkpoints leaves none behind.
  if (auto own = newest_valid(dir, run, keep)) {
    const std::string writer = run_of(*own->reader);
    if (!writer.empty() && writer != run) {
      throw InvalidArgument(own->path + ": written by run " + writer + ", found in run " +
                            (run.empty() ? "(none)" : run) + "'s folder; move it back to " +
                            launch::run_checkpoint_dir(dir, writer) +
                            ", then start from it with spec.training.checkpoint.resumeFrom: " + writer);
    }
    ResumeChoice c;
    c.reason = launch::ResumeReason::kThisRun;
    c.from_run = run;
    c.found = std::move(own);
    return c;
  }
  std::vector<RunCheckpoints> others = runs_in(dir);
  std::erase_if(others, [&](const RunCheckpoints& r) { return r.run == run; });
  if (!resume_from.empty()) return from_resume_from(dir, run, resume_from, keep, others);
  ResumeChoice c;
  c.other_runs = std::move(others);
  return c;
}

}  // namespace torus::worker::checkpoint

#include "worker/app/run_start.h"

#include <cstdio>

#include "common/launch/checkpoint_layout.h"

namespace torus::worker::app {
namespace {

using launch::ResumeReason;

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%%", fraction * 100);
  return buf;
}

std::string run_name(const std::string& run) { return run.empty() ? "the unnamed run" : "run " + run; }

// "DIR also holds checkpoints of run X (newest: step 234) and 2 more run(s): ..."
std::string other_runs_line(const train::TrainConfig& config, const train::Resumed& resumed) {
  const auto& others = resumed.other_runs;
  const checkpoint::RunCheckpoints& newest = others.front();
  std::string line = config.checkpoint.dir + " also holds checkpoints of " + run_name(newest.run) + " (newest: step " +
                     std::to_string(newest.newest_step) + ")";
  if (others.size() > 1) line += " and " + std::to_string(others.size() - 1) + " more run(s)";
  return line + "; to continue one, set spec.training.checkpoint.resumeFrom to latest or a run id (torus run --resume)";
}

std::string nothing_left_line(const train::TrainConfig& config, const train::Resumed& resumed, train::LeftToTrain left,
                              const train::EvalResult& eval) {
  const std::string evaluation = eval.samples > 0 ? "validation top-1 " + percent(eval.top1) : "no evaluation recorded";
  const std::string done = std::to_string(resumed.epoch) + " of " + std::to_string(config.epochs) + " epochs done";
  if (left == train::LeftToTrain::kNoneTargetReached) {
    return "nothing left to train: the checkpoint reached the target accuracy " + percent(config.target_accuracy) +
           " (" + evaluation + ", " + done + "); raise spec.training.targetAccuracy to train further";
  }
  return "nothing left to train: the checkpoint has finished its training (" + done + ", " + evaluation +
         "); raise spec.training.epochs to train further";
}

}  // namespace

std::vector<std::string> describe_start(const train::TrainConfig& config, const train::Resumed& resumed,
                                        train::LeftToTrain left, const train::EvalResult& last_evaluation) {
  std::vector<std::string> lines;
  const std::string& run = config.checkpoint.run;
  const std::string at = "step " + std::to_string(resumed.step) + ", " + std::to_string(resumed.epoch) + " of " +
                         std::to_string(config.epochs) + " epochs done";
  switch (resumed.reason) {
    case ResumeReason::kFresh:
      lines.push_back(
          (run.empty() ? std::string("this run") : "run " + run) + " starts from step 0" +
          (config.checkpoint.dir.empty()
               ? " (checkpoints off)"
               : " (no checkpoint of its own in " + launch::run_checkpoint_dir(config.checkpoint.dir, run) + ")"));
      if (!resumed.other_runs.empty()) lines.push_back(other_runs_line(config, resumed));
      break;
    case ResumeReason::kThisRun:
      lines.push_back("resuming at step " + std::to_string(resumed.step) + " from " + resumed.path + ": " +
                      run_name(run) + "'s own checkpoint (" + at + ")");
      break;
    case ResumeReason::kResumeFrom:
      lines.push_back("resuming at step " + std::to_string(resumed.step) + " from " + resumed.path + ": " +
                      run_name(resumed.from_run) + "'s checkpoint (" + at +
                      "), as spec.training.checkpoint.resumeFrom: " + config.checkpoint.resume_from +
                      " asks; this is " + run_name(run) + ", which writes its own checkpoints to " +
                      launch::run_checkpoint_dir(config.checkpoint.dir, run));
      break;
  }
  if (left != train::LeftToTrain::kSome) lines.push_back(nothing_left_line(config, resumed, left, last_evaluation));
  return lines;
}

}  // namespace torus::worker::app

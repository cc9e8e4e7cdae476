#pragma once
// What rank 0 says about where a run starts (logged before the first step; `torus run` shows it): a new run from
// step 0 (and which other runs' checkpoints the folder holds, and how to start from one), a restart from the run's
// own checkpoint, or another run's checkpoint as spec.training.checkpoint.resumeFrom asks; and when the checkpoint
// has nothing left to train, that, and which field would give it more.
#include <string>
#include <vector>

#include "worker/train/config.h"
#include "worker/train/trainer.h"

namespace torus::worker::app {

std::vector<std::string> describe_start(const train::TrainConfig& config, const train::Resumed& resumed,
                                        train::LeftToTrain left, const train::EvalResult& last_evaluation);

}  // namespace torus::worker::app

#pragma once
// What the trainer's files share (trainer.cc: construction and the run; trainer_step.cc: steps, events, the end of
// an epoch; trainer_state.cc: evaluation, arenas, checkpoints). Not part of the trainer's interface.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "worker/train/trainer.h"

namespace torus::worker::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// An epoch's step time and its parts, for the epoch's log line.
struct StepSplit {
  int64_t steps = 0;
  double step = 0, data = 0, compute = 0, comm = 0;
  void add(const ProgressEvent& e) {
    ++steps;
    step += e.step_seconds;
    data += e.data_wait_seconds;
    compute += e.compute_seconds;
    comm += e.comm_wait_seconds;
  }
  std::string str() const {
    auto share = [&](double part) { return std::to_string(std::lround(100 * part / std::max(step, 1e-12))) + "%"; };
    char head[96];
    std::snprintf(head, sizeof head, "%lld steps in %.1f s (%.1f ms/step): ", static_cast<long long>(steps), step,
                  1e3 * step / static_cast<double>(std::max<int64_t>(steps, 1)));
    return head + ("data wait " + share(data)) + ", compute " + share(compute) + ", communication wait " + share(comm) +
           ", other " + share(step - data - compute - comm);
  }
};

// What one epoch's steps add up to, for its end-of-epoch event and log line.
struct Trainer::EpochTally {
  Clock::time_point start = Clock::now();
  int64_t batches = 0;  // in the epoch
  int64_t images = 0, steps = 0;
  double loss_sum = 0;
  StepSplit split;
};

}  // namespace torus::worker::train

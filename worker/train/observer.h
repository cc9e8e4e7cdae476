#pragma once
// Structured progress from the training loop: metrics, the `torus run` progress line and logs subscribe here.
#include <cstdint>
#include <string>

namespace torus::worker::train {

enum class EventKind : uint8_t { kStep, kEpochEnd, kEvaluation, kCheckpoint, kFinished };

struct ProgressEvent {
  EventKind kind = EventKind::kStep;
  int64_t epoch = 0;  // the epoch the event belongs to (0-based)
  int64_t step = 0;   // optimizer steps completed over the run
  double fractional_epoch = 0;
  double loss = 0;  // kStep: this step's loss; kEpochEnd: the epoch's mean loss; kEvaluation: val loss
  double lr = 0;
  double accuracy = 0;            // kEvaluation: top-1 in 0..1, over all ranks
  double top5 = 0;                // kEvaluation: top-5 (classes >= 5)
  double images_per_second = 0;   // this rank's training throughput over the epoch so far
  double elapsed_seconds = 0;     // since run() started
  std::string checkpoint_path;    // kCheckpoint
  double checkpoint_seconds = 0;  // kCheckpoint: time to write it
  double data_wait_seconds = 0;   // kStep: time this step waited for its batch
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_event(const ProgressEvent& event) = 0;
};

}  // namespace torus::worker::train

#pragma once
// Structured progress from the training loop: metrics, the `torus run` progress line and logs subscribe here.
#include <cstdint>
#include <string>

namespace torus::worker::train {

enum class EventKind : uint8_t { kStep, kEpochEnd, kEvaluation, kCheckpoint, kFinished };
// What the optimizer did with a step's gradients: fp16 skips a step whose gradients overflowed.
enum class StepUpdate : uint8_t { kApplied, kSkipped };
// How a step ran: its ops one by one, or one replay of a captured step (device_plan.h).
enum class StepExecution : uint8_t { kEager, kReplayed };

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
  // kStep: where the step's time went on this rank. data_wait + compute + comm_wait <= step; the rest is
  // bookkeeping (uploading the batch counts as compute). Checkpoints and evaluations are not part of a step.
  int64_t images = 0;            // kStep: images this rank trained on in the step (the phase's batch)
  double step_seconds = 0;       // from asking for the batch to the end of the step's last collective
  double data_wait_seconds = 0;  // blocked waiting for the loader's batch
  double compute_seconds = 0;    // upload, forward, loss, backward, update: this rank's own work
  double comm_wait_seconds = 0;  // blocked on the gradient all-reduce after backward, plus the stop agreement
  // kStep, fp16 only (dynamic loss scaling; 0 / kApplied otherwise): the scale after the step, whether this step's
  // update was skipped (its gradients overflowed), and the steps skipped since the run began (a resumed run continues
  // the checkpoint's count).
  double loss_scale = 0;
  StepUpdate update = StepUpdate::kApplied;
  int64_t skipped_steps = 0;
  StepExecution execution = StepExecution::kEager;  // kStep
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_event(const ProgressEvent& event) = 0;
};

}  // namespace torus::worker::train

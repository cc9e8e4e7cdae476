#pragma once
// One optimizer step on one batch: forward, label-smoothed loss, backward (gradients announced to the
// GradientSync as they become final), averaging, SGD update. Shared by the training loop and the benchmark.
#include <memory>

#include "worker/nn/model.h"
#include "worker/optim/sgd.h"
#include "worker/train/precision.h"
#include "worker/train/sync.h"

namespace torus::worker::train {

class TrainStep {
 public:
  // `sync` may be null: the gradients are used as they are (one rank). With kDynamic loss scaling (fp16; the caller
  // enabled it on the backend) each step unscales the averaged gradients, updates (or skips, on inf/NaN) and advances
  // the scale.
  TrainStep(nn::Model& model, const optim::SgdConfig& sgd, float label_smoothing, GradientSync* sync,
            LossScaling loss_scaling = LossScaling::kOff);

  // images (N, H, W, C), labels (N) int32, both in backend memory. Returns the batch's mean loss.
  double run(Tensor images, Tensor labels, float lr);
  // The same step without a host wait (unless the gradient sync waits): the mean loss lands in `loss` and the
  // learning rate is read from `lr_value` when the update runs (1 fp32 each, backend memory). Allocates nothing
  // once a step of this shape has run, so a backend can capture it (Backend::capture_step).
  void run_async(Tensor images, Tensor labels, Tensor lr_value, Tensor loss);
  // Where the last run() spent its time, as seen from this rank's thread (on a GPU: until the host blocks).
  struct Times {
    double compute_seconds = 0;    // forward, loss, backward, update
    double comm_wait_seconds = 0;  // blocked in GradientSync::finish_step: all-reduce not hidden behind backward
  };
  const Times& last_times() const { return times_; }
  // Loss and correct counts without touching parameters or statistics (evaluation mode).
  struct EvalCounts {
    double loss_sum = 0;
    int64_t top1 = 0, top5 = 0, samples = 0;
  };
  EvalCounts evaluate(Tensor images, Tensor labels);

  optim::Sgd& optimizer() { return sgd_; }
  LossScaling loss_scaling() const { return loss_scaling_; }
  nn::Model& model() { return model_; }

 private:
  // forward .. update; `loss` empty: the loss is read on the host (returned), else written there.
  double step(Tensor images, Tensor labels, float lr, Tensor lr_value, Tensor loss);

  nn::Model& model_;
  optim::Sgd sgd_;
  float label_smoothing_;
  LossScaling loss_scaling_;
  LocalGradientSync local_;
  GradientSync* sync_;
  nn::Scratch dlogits_;
  Times times_;
};

}  // namespace torus::worker::train

#include "worker/train/step.h"

#include <algorithm>
#include <chrono>

namespace torus::worker::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

TrainStep::TrainStep(nn::Model& model, const optim::SgdConfig& sgd, float label_smoothing, GradientSync* sync,
                     LossScaling loss_scaling)
    : model_(model),
      sgd_(model.backend(), model.context().params, sgd),
      label_smoothing_(label_smoothing),
      loss_scaling_(loss_scaling),
      sync_(sync != nullptr ? sync : &local_) {
  model_.context().grad_ready = [this](size_t i) { sync_->grad_ready(i); };
}

double TrainStep::run(Tensor images, Tensor labels, float lr) { return step(images, labels, lr, {}, {}); }

void TrainStep::run_async(Tensor images, Tensor labels, Tensor lr_value, Tensor loss) {
  step(images, labels, 0.0f, lr_value, loss);
}

double TrainStep::step(Tensor images, Tensor labels, float lr, Tensor lr_value, Tensor loss_out) {
  Backend& be = model_.backend();
  const auto start = Clock::now();
  sync_->begin_step();
  Tensor logits = model_.forward(images, Mode::kTrain);  // (N, K)
  Tensor dlogits = dlogits_.get(be, logits.shape());
  double loss = 0;
  if (loss_out.empty()) {
    loss = be.softmax_cross_entropy(logits, labels, label_smoothing_, dlogits);
  } else {
    be.softmax_cross_entropy_async(logits, labels, label_smoothing_, dlogits, loss_out);
  }
  model_.backward(dlogits);
  // Buckets were all-reduced on the communication thread while backward ran; what is left to wait for here is the
  // communication that backward did not hide (and, with a peer behind, the time until that peer catches up).
  const auto wait_start = Clock::now();
  sync_->finish_step();
  const auto wait_end = Clock::now();
  // Unscaled after the all-reduce, not before: every rank then holds the same averaged gradients, finds the same
  // inf/NaN, and skips the same steps (the backend's sgd_update skips a flagged step; no host round trip).
  if (loss_scaling_ == LossScaling::kDynamic) be.unscale_gradients(model_.context().grads.all());
  sgd_.step(model_.context().params, model_.context().grads, lr, lr_value);
  if (loss_scaling_ == LossScaling::kDynamic) be.update_loss_scale();
  const auto end = Clock::now();
  times_.comm_wait_seconds = seconds(wait_end - wait_start);
  times_.compute_seconds = seconds(wait_start - start) + seconds(end - wait_end);
  return loss;
}

TrainStep::EvalCounts TrainStep::evaluate(Tensor images, Tensor labels) {
  Backend& be = model_.backend();
  Tensor logits = model_.forward(images, Mode::kEval);
  EvalCounts c;
  c.samples = logits.shape()[0];
  c.loss_sum = be.softmax_cross_entropy(logits, labels, 0.0f, Tensor()) * static_cast<double>(c.samples);
  c.top1 = be.count_top_k(logits, labels, 1);
  c.top5 = be.count_top_k(logits, labels, static_cast<int>(std::min<int64_t>(5, logits.shape()[1])));
  return c;
}

}  // namespace torus::worker::train

#include <algorithm>
#include <cmath>
#include <string>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/train/trainer_internal.h"

namespace torus::worker::train {

void Trainer::emit(ProgressEvent event) const {
  event.elapsed_seconds = seconds_since(started_);
  deliver(event);
}

void Trainer::deliver(const ProgressEvent& event) const {
  if (observer_ != nullptr) observer_->on_event(event);
}

ProgressEvent Trainer::progress_event(EventKind kind) const {
  ProgressEvent event;
  event.kind = kind;
  event.epoch = epoch_;
  event.step = step_;
  return event;
}

Trainer::BatchTensors Trainer::upload_batch(const data::Batch& batch, Buffer& images, Buffer& labels) {
  const int64_t n = batch.n;
  const Shape shape{n, batch.h, batch.w, batch.c};
  const DType type = precision_.activations;  // the first layer's input is an activation like any other
  const size_t pixels = static_cast<size_t>(shape.numel());
  if (images.bytes() < pixels * dtype_size(type)) images = backend_.allocate(pixels * dtype_size(type));
  if (labels.bytes() < static_cast<size_t>(n) * 4) labels = backend_.allocate(static_cast<size_t>(n) * 4);
  BatchTensors t{images.view(shape, type), labels.view({n}, DType::kI32)};
  if (type == DType::kF32) {
    backend_.upload(batch.images, t.images);
  } else {
    // The loader hands out fp32; the backend converts (copy() converts between dtypes), one pass over the batch.
    if (images_f32_.bytes() < pixels * sizeof(float)) images_f32_ = backend_.allocate(pixels * sizeof(float));
    const Tensor staged = images_f32_.view(shape);
    backend_.upload(batch.images, staged);
    backend_.copy(staged, t.images);
  }
  backend_.upload(batch.labels, t.labels);
  return t;
}

Trainer::Stop Trainer::train_step(const data::Batch& batch, Clock::time_point step_start, double data_wait,
                                  EpochTally& tally) {
  const auto work_start = Clock::now();
  const BatchTensors t = upload_batch(batch, images_, labels_);
  const double lr = lr_now(tally.batches);
  const double loss = step_runner_->run(t.images, t.labels, static_cast<float>(lr));
  check_loss(loss, step_, lr);
  return finish_step({loss, lr, batch.n, seconds_since(work_start), data_wait,
                      step_runner_->last_times().comm_wait_seconds, step_start},
                     tally);
}

void Trainer::check_loss(double loss, int64_t step, double lr) const {
  if (!std::isfinite(loss))
    throw Error("training diverged: loss is " + std::to_string(loss) + " at step " + std::to_string(step) + " (lr " +
                std::to_string(lr) + "); lower the learning rate");
}

Trainer::Stop Trainer::finish_step(const StepWork& work, EpochTally& tally) {
  ++step_;
  ++batch_;
  ++tally.steps;
  tally.images += work.images;
  ProgressEvent e = progress_event(EventKind::kStep);
  e.fractional_epoch = static_cast<double>(epoch_) + static_cast<double>(batch_) / static_cast<double>(tally.batches);
  e.lr = work.lr;
  e.images = work.images;
  e.execution = work.execution;
  e.images_per_second = static_cast<double>(tally.images) / seconds_since(tally.start);
  // The device path reads the loss scale with the losses, once per flush (flush_losses): a read here would wait for
  // the step's kernels every step.
  if (precision_.loss_scaling == LossScaling::kDynamic && work.loss) record_loss_scale(e);
  // The stop agreement is a collective of this step: a rank that waits in it waits for a peer.
  const auto agree_start = Clock::now();
  const bool stopping = agree_to_stop();
  const double stop_wait = seconds_since(agree_start);
  e.step_seconds = seconds_since(work.start);
  e.data_wait_seconds = work.data_wait_seconds;
  e.comm_wait_seconds = work.comm_wait_seconds + stop_wait;
  e.compute_seconds = std::max(work.work_seconds - work.comm_wait_seconds, 0.0);
  tally.split.add(e);
  e.elapsed_seconds = seconds_since(started_);
  if (work.loss) {
    e.loss = *work.loss;
    tally.loss_sum += e.loss;
    deliver(e);
    if (config_.log_every_steps > 0 && step_ % config_.log_every_steps == 0) {
      TLOG(Info) << "epoch " << epoch_ + 1 << "/" << config_.epochs << " step " << step_ << " loss " << e.loss << " lr "
                 << e.lr << " " << static_cast<int64_t>(e.images_per_second) << " img/s";
    }
  } else {
    pending_.push_back(e);  // flush_losses() completes and emits it
  }
  return stopping ? Stop::kAgreed : Stop::kNo;
}

Trainer::Target Trainer::end_epoch(const EpochTally& tally, RunResult& result) {
  ProgressEvent end = progress_event(EventKind::kEpochEnd);
  end.fractional_epoch = static_cast<double>(epoch_ + 1);
  end.loss = tally.steps > 0 ? tally.loss_sum / static_cast<double>(tally.steps) : 0;
  end.images_per_second = static_cast<double>(tally.images) / std::max(seconds_since(tally.start), 1e-9);
  emit(end);
  ++epoch_;
  batch_ = 0;
  ++result.epochs_completed;
  result.last_eval = evaluate();
  ProgressEvent eval = progress_event(EventKind::kEvaluation);
  eval.epoch = epoch_ - 1;  // the epoch just evaluated
  eval.fractional_epoch = static_cast<double>(epoch_);
  eval.loss = result.last_eval.loss;
  eval.accuracy = result.last_eval.top1;
  eval.top5 = result.last_eval.top5;
  emit(eval);
  TLOG(Info) << "epoch " << epoch_ << "/" << config_.epochs << " done: train loss " << end.loss << ", "
             << static_cast<int64_t>(end.images_per_second) << " img/s; validation top-1 "
             << result.last_eval.top1 * 100 << "%, loss " << result.last_eval.loss << " (" << seconds_since(started_)
             << " s); " << tally.split.str();
  last_eval_ = result.last_eval;
  // Before the checkpoint, which records it: a run resumed from it has nothing left to train.
  if (config_.target_accuracy > 0 && result.last_eval.top1 >= config_.target_accuracy) target_ = Target::kReached;
  maybe_checkpoint(true);
  if (target_ == Target::kReached) {
    result.reached_target = true;
    result.seconds_to_target = seconds_since(started_);
  }
  return target_;
}

void Trainer::record_loss_scale(ProgressEvent& e) {
  // A 16-byte read that waits for the step's kernels; the step's loss was read on the host already, so the step
  // waited for its forward anyway. The skip itself needs no host: the optimizer kernels read the device's flag.
  const LossScaleState state = backend_.loss_scale_state();
  e.loss_scale = static_cast<double>(state.scale);
  e.skipped_steps = state.skipped;
  if (state.skipped > skipped_steps_) {
    e.update = StepUpdate::kSkipped;
    TLOG(Info) << "step " << step_ << " skipped: fp16 gradients overflowed (" << state.skipped
               << " skipped so far); loss scale now " << state.scale;
  }
  skipped_steps_ = state.skipped;
}

bool Trainer::agree_to_stop() {
  if (stop_flag_ == nullptr) return false;
  // Every rank stops after the same step (a signal reaches ranks at slightly different times): otherwise a rank
  // that stopped early leaves its peers blocked in the next step's all-reduce.
  double requested = stop_requested() ? 1.0 : 0.0;
  if (collectives_.world_size() > 1) collectives_.all_reduce_sum(std::span<double>(&requested, 1));
  return requested > 0;
}

}  // namespace torus::worker::train

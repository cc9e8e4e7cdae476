// The training loop's device path (DevicePlan::staging kPinned): staging, device augmentation, captured steps and
// losses read once per log interval. device_plan.h says when each applies.
#include <algorithm>
#include <string>
#include <vector>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/train/trainer_internal.h"

namespace torus::worker::train {

std::optional<DeviceInput::Staged> Trainer::stage_next() {
  std::optional<data::Batch> batch = loader_->next();
  if (!batch) return std::nullopt;
  return device_input_->stage(*batch);
}

Trainer::Stop Trainer::run_steps_staged(int64_t stop_at, EpochTally& tally) {
  auto step_start = Clock::now();
  double waited = loader_->wait_seconds();
  std::optional<DeviceInput::Staged> next = step_ != stop_at ? stage_next() : std::nullopt;
  while (next) {
    const DeviceInput::Staged current = *next;
    const auto work_start = Clock::now();
    const double lr = lr_now(tally.batches);
    const DeviceStep done = device_step(current, lr);
    const double work = seconds_since(work_start);
    // Batch k+1 goes into the other pinned slot and uploads while the device runs step k.
    next = step_ + 1 != stop_at ? stage_next() : std::nullopt;
    const double data_wait = std::max(loader_->wait_seconds() - waited, 0.0);
    const Stop stop = finish_step(
        {std::nullopt, lr, current.n, work, data_wait, done.comm_wait_seconds, step_start, done.execution}, tally);
    if (stop == Stop::kAgreed || flush_due()) flush_losses(tally);
    if (stop == Stop::kAgreed) return Stop::kAgreed;  // run() checkpoints, once
    maybe_checkpoint(false);
    step_start = Clock::now();
    waited = loader_->wait_seconds();
  }
  flush_losses(tally);
  return Stop::kNo;
}

Trainer::DeviceStep Trainer::device_step(const DeviceInput::Staged& staged, double lr) {
  const api::ResolvedPhase& phase = phase_now();
  const AugmentSpec spec = augment_spec(config_.data.transform, config_.seed, epoch_, collectives_.rank());
  // Sample i of the batch draws its augmentation from its position in this rank's epoch.
  const uint64_t first_sample = static_cast<uint64_t>(batch_) * static_cast<uint64_t>(phase.per_rank_batch);
  const DeviceInput::Input in = device_input_->take(staged, spec, first_sample);
  const Tensor lr_value = lr_value_.view({1});
  const Tensor loss = loss_.view({1});
  backend_.fill(lr_value, static_cast<float>(lr));  // enqueued before the step: a replay reads this step's rate
  auto step = [this, in, lr_value, loss] { step_runner_->run_async(in.images, in.labels, lr_value, loss); };
  DeviceStep done;
  if (device_plan_.step == StepRun::kEager || !warmed_up_) {
    step();  // the epoch's first step builds every plan and buffer a capture then finds in place
    done.comm_wait_seconds = step_runner_->last_times().comm_wait_seconds;
    warmed_up_ = true;
  } else {
    if (!captured_) {
      captured_ = backend_.capture_step(step);  // records without running: the replay below runs this step
      if (!captured_) throw Error(backend_.name() + " backend: no captured step, though it offers capture");
      ++captures_;
    }
    captured_->replay();
    if (sync_ != nullptr) sync_->replayed();  // the replay's collectives are watched like an eager step's
    ++replays_;
    done.execution = StepExecution::kReplayed;
  }
  // The loss goes to its place in the ring; one download per log interval reads them all.
  const size_t at = pending_.size() * sizeof(float);
  backend_.copy(loss, Tensor(static_cast<std::byte*>(loss_ring_.data()) + at, {1}));
  return done;
}

bool Trainer::flush_due() const {
  const bool log_due = config_.log_every_steps > 0 && step_ % config_.log_every_steps == 0;
  const CheckpointConfig& c = config_.checkpoint;
  const bool checkpoint_due = !c.dir.empty() && c.every_steps > 0 && step_ % c.every_steps == 0;
  return pending_.size() >= loss_ring_size_ || log_due || checkpoint_due;
}

void Trainer::record_loss_scales(std::vector<ProgressEvent>& events) {
  const LossScaleState state = backend_.loss_scale_state();  // after the losses' download: no further wait
  const int64_t skipped = state.skipped - skipped_steps_;
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].loss_scale = static_cast<double>(state.scale);
    events[i].skipped_steps = state.skipped;
    // Which of the interval's steps overflowed is on the device only; the count is exact (the metric adds them up).
    if (static_cast<int64_t>(events.size() - i) <= skipped) events[i].update = StepUpdate::kSkipped;
  }
  if (skipped > 0 && !events.empty()) {
    TLOG(Info) << skipped << " of steps " << events.front().step << ".." << events.back().step
               << " skipped: fp16 gradients overflowed (" << state.skipped << " skipped so far); loss scale now "
               << state.scale;
  }
  skipped_steps_ = state.skipped;
}

void Trainer::flush_losses(EpochTally& tally) {
  if (pending_.empty()) return;
  std::vector<float> losses(pending_.size());
  backend_.download(Tensor(loss_ring_.data(), {static_cast<int64_t>(losses.size())}), losses.data());
  std::vector<ProgressEvent> events;
  events.swap(pending_);
  if (precision_.loss_scaling == LossScaling::kDynamic) record_loss_scales(events);
  for (size_t i = 0; i < events.size(); ++i) {
    ProgressEvent& e = events[i];
    e.loss = losses[i];
    check_loss(e.loss, e.step - 1, e.lr);  // the step's index, as the host path names it
    tally.loss_sum += e.loss;
    deliver(e);
    if (config_.log_every_steps > 0 && e.step % config_.log_every_steps == 0) {
      TLOG(Info) << "epoch " << e.epoch << " step " << e.step << " loss " << e.loss << " lr " << e.lr << " "
                 << static_cast<int64_t>(e.images_per_second) << " img/s";
    }
  }
}

}  // namespace torus::worker::train

#pragma once
// The training loop of one rank: epochs of batches from the prefetching loader, LR schedule and phases,
// evaluation (counts summed across ranks, BN statistics averaged first), early stop at the target accuracy,
// checkpoints (save / resume exactly where a run stopped). On a device backend, batches are staged, augmented and
// stepped as device_plan.h decides (trainer_device.cc). Files: trainer.cc (construction, the run), trainer_step.cc
// (a step's bookkeeping, events, the end of an epoch), trainer_device.cc (the device path), trainer_state.cc
// (evaluation, arena collectives, checkpoints), trainer_describe.cc (what it runs, in words).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/launch/checkpoint_layout.h"
#include "worker/backend/backend.h"
#include "worker/checkpoint/resume_choice.h"
#include "worker/data/dataset.h"
#include "worker/data/loader.h"
#include "worker/train/config.h"
#include "worker/train/device_input.h"
#include "worker/train/device_plan.h"
#include "worker/train/observer.h"
#include "worker/train/precision.h"
#include "worker/train/step.h"
#include "worker/train/sync.h"

namespace torus::worker::train {

struct Datasets {
  std::shared_ptr<const data::Dataset> train, val;
};
// Loads the training and validation sets the config names; throws InvalidArgument naming the path.
Datasets load_datasets(const DataConfig& config, uint64_t seed);

// Builds the gradient averaging for a model's gradient arena (the comm layer's); null means one rank.
using GradientSyncFactory = std::function<std::unique_ptr<GradientSync>(const Arena& grads)>;

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;
  int64_t samples = 0;  // summed over ranks
  // This rank's batches, in order: their image (H, W). One size unless rectangular validation is on.
  std::vector<data::ImageSize> batch_sizes;
};

// What a run has left to train when it starts: a resumed run may have finished already.
enum class LeftToTrain : uint8_t {
  kSome,
  kNoneAllEpochsDone,  // its checkpoint is at the end of the last epoch
  kNoneTargetReached,  // its checkpoint's evaluation reached training.targetAccuracy
};
std::string_view to_string(LeftToTrain left);  // "some", "all epochs done", "target reached"

// Where a run starts (resume()): every rank gets the position, rank 0 also where it came from and why.
struct Resumed {
  launch::ResumeReason reason = launch::ResumeReason::kFresh;
  std::string from_run;  // the run that wrote the checkpoint (rank 0)
  std::string path;      // the checkpoint file (rank 0)
  int64_t step = 0, epoch = 0;
  std::vector<checkpoint::RunCheckpoints> other_runs;  // kFresh, rank 0: other runs' checkpoints in the folder
  bool from_checkpoint() const { return reason != launch::ResumeReason::kFresh; }
};

struct RunResult {
  int64_t steps = 0;
  int64_t epochs_completed = 0;
  EvalResult last_eval;
  bool reached_target = false;
  bool stopped = false;  // a stop was requested (SIGTERM): the run checkpointed and ended early
  double seconds = 0;
  double seconds_to_target = 0;  // when reached_target
  // kNone...: the run trained nothing (last_eval is its checkpoint's evaluation, when it had one).
  LeftToTrain left_at_start = LeftToTrain::kSome;
};

class Trainer {
 public:
  Trainer(Backend& backend, TrainConfig config, Datasets data, Collectives& collectives,
          const GradientSyncFactory& sync_factory = nullptr, TrainObserver* observer = nullptr);
  ~Trainer();

  // Trains until the last epoch, the target accuracy, or `max_steps` more steps (0: no limit), whichever is first.
  RunResult run(int64_t max_steps = 0);
  // When `*flag` becomes true (e.g. from a SIGTERM handler), run() finishes the current step, checkpoints (rank 0,
  // when a checkpoint dir is set) and returns with `stopped`. The flag must outlive the trainer.
  void set_stop_flag(const std::atomic<bool>* flag) { stop_flag_ = flag; }
  // Evaluates on the whole validation set (this rank's shard; counts summed over ranks).
  EvalResult evaluate();

  // Checkpoints: parameters, BN statistics, momentum (all in plain layouts), step, epoch, data position, seed, the
  // run that wrote it, the last evaluation and whether it reached the target, and with fp16 the loss scale (scale,
  // finite steps since its last change, skipped steps).
  void save_checkpoint(const std::string& path) const;
  void restore_checkpoint(const checkpoint::CheckpointReader& reader);
  // Rank 0 chooses the run's starting point (checkpoint::choose_resume: this run's newest valid checkpoint, else the
  // one config.checkpoint.resume_from names, else none) and restores it; every rank takes its state and position.
  Resumed resume();
  // What is left to train from the current position (kSome before any resume).
  LeftToTrain left_to_train() const;
  // The last evaluation: this run's, or the checkpoint's it resumed from (samples 0: none).
  const EvalResult& last_evaluation() const { return last_eval_; }
  // Identifies the architecture: a checkpoint of another model is refused.
  std::string model_signature() const;

  const PrecisionPlan& precision() const { return precision_; }
  // The dtype the model's layers were built with (what the precision plan made of spec.training.precision).
  DType activation_dtype() const { return model_->config().activation_dtype; }
  // What this trainer runs, one "key: value" line each (model, data, optimizer, learning rate, phases, precision plan,
  // seed, checkpoint rule), from the config and plan it acts on: what rank 0 logs (trainer_describe.cc).
  std::vector<std::string> describe() const;
  // How batches reach the backend and how steps run (device_plan.h); logged by rank 0 at construction.
  const DevicePlan& device_plan() const { return device_plan_; }
  // Captured steps: how many captures (one per epoch) and replays (every captured step) so far.
  int64_t step_captures() const { return captures_; }
  int64_t step_replays() const { return replays_; }
  int64_t step() const { return step_; }
  int64_t epoch() const { return epoch_; }
  int64_t batch_in_epoch() const { return batch_; }
  nn::Model& model() { return *model_; }

 private:
  const api::ResolvedPhase& phase_now() const {
    return api::phase_for_epoch(config_.phases, static_cast<int32_t>(epoch_));
  }
  double lr_now(int64_t batches_in_epoch) const;
  void start_epoch();
  void average_bn_statistics();
  // What an arena holds: after parameters change the backend drops what it derived from them (weight shadows).
  enum class ArenaContent : uint8_t { kParameters, kOther };
  // Runs a host collective `op` over a whole arena (initial and restore broadcasts, BN averaging): on the arena itself
  // when backend memory is host memory, else on a host copy downloaded before and uploaded after.
  void on_arena(const Arena& arena, ArenaContent content, const std::function<void(std::span<float>)>& op);
  void check_layouts_agree();
  // Chooses the device plan, logs it (rank 0) and, with staging, makes the device input and its buffers.
  void setup_device();
  // The training loader of the first phase (raw pixels when the device augments).
  std::unique_ptr<data::Loader> make_train_loader() const;
  // One run's pieces: an epoch's steps, one step, the end of an epoch (event, evaluation, checkpoint, target).
  struct EpochTally;
  enum class Stop : uint8_t { kNo, kAgreed };
  enum class Target : uint8_t { kNotYet, kReached };
  Stop run_steps(int64_t stop_at, EpochTally& tally);
  Stop train_step(const data::Batch& batch, std::chrono::steady_clock::time_point step_start, double data_wait,
                  EpochTally& tally);
  // A step's work is done (host path: with its loss) or enqueued (device path: its loss still on the device).
  struct StepWork {
    std::optional<double> loss;  // nullopt: read later (flush_losses)
    double lr = 0;
    int images = 0;
    double work_seconds = 0, data_wait_seconds = 0;
    double comm_wait_seconds = 0;  // inside work_seconds: blocked in the gradient sync
    std::chrono::steady_clock::time_point start;
    StepExecution execution = StepExecution::kEager;
  };
  // Counts the step, builds its event, agrees on stopping; emits the event now, or queues it until its loss is read.
  Stop finish_step(const StepWork& work, EpochTally& tally);
  // The device path (DevicePlan::staging kPinned): batch k+1 is staged while step k runs; losses are read in one
  // download per log interval (flush_losses), not per step.
  Stop run_steps_staged(int64_t stop_at, EpochTally& tally);
  // The next batch of the epoch, staged (its upload started); nullopt at the epoch's end.
  std::optional<DeviceInput::Staged> stage_next();
  // Enqueues one step on the staged batch: eagerly, captured (the epoch's second step) or replayed.
  struct DeviceStep {
    double comm_wait_seconds = 0;  // blocked in the gradient sync (eager steps)
    StepExecution execution = StepExecution::kEager;
  };
  DeviceStep device_step(const DeviceInput::Staged& staged, double lr);
  // Reads the queued steps' losses (one host wait), checks them, and emits their events.
  void flush_losses(EpochTally& tally);
  bool flush_due() const;
  void check_loss(double loss, int64_t step, double lr) const;
  Target end_epoch(const EpochTally& tally, RunResult& result);
  struct BatchTensors {
    Tensor images;  // (N, H, W, C)
    Tensor labels;  // (N), int32
  };
  // Uploads a batch into `images` and `labels`, growing them when it does not fit.
  BatchTensors upload_batch(const data::Batch& batch, Buffer& images, Buffer& labels);
  // An event of `kind` at the current epoch and step; emit() stamps the elapsed time.
  ProgressEvent progress_event(EventKind kind) const;
  void emit(ProgressEvent event) const;
  void deliver(const ProgressEvent& event) const;  // as stamped
  void maybe_checkpoint(bool epoch_end);
  void checkpoint_now();
  // fp16: reads the loss scale into a step's event (and logs a skipped step).
  void record_loss_scale(ProgressEvent& e);
  // fp16 on the device path: the loss scale read once for a flush's events (the scale after its last step; the steps
  // skipped in it marked on its last events).
  void record_loss_scales(std::vector<ProgressEvent>& events);
  // fp16: continues with a checkpoint's loss scale (metadata "loss_scale"); nothing for fp32/bf16.
  void restore_loss_scale(const nlohmann::json& meta, const std::string& file);
  // The checkpoint's last evaluation (metadata "evaluation"), and whether it reached this run's target there.
  void restore_evaluation(const nlohmann::json& meta, const std::string& file);
  // Every rank takes rank 0's position, loss scale, target state and restored arenas (after a restore on rank 0), or
  // learns that rank 0 refused to start (kRefused on every rank).
  enum class Refusal : uint8_t { kNone, kRefused };
  Refusal share_position(Resumed& resumed, Refusal refusal);
  bool stop_requested() const { return stop_flag_ != nullptr && stop_flag_->load(std::memory_order_relaxed); }
  // True on every rank when any rank was asked to stop (one tiny all-reduce per step).
  bool agree_to_stop();

  Backend& backend_;
  TrainConfig config_;
  Datasets data_;
  Collectives& collectives_;
  TrainObserver* observer_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<TrainStep> step_runner_;
  std::unique_ptr<data::Loader> loader_;
  PrecisionPlan precision_;
  Buffer images_, labels_;
  Buffer images_f32_;  // half activations: the batch is uploaded here in fp32, then converted on the backend
  DevicePlan device_plan_;
  std::unique_ptr<DeviceInput> device_input_;  // staging kPinned
  Buffer lr_value_;                            // 1 fp32: the learning rate the update reads
  Buffer loss_;                                // 1 fp32: the step's loss (a captured step writes here)
  Buffer loss_ring_;                           // the queued steps' losses, in step order
  size_t loss_ring_size_ = 0;
  // This epoch's captured step (dropped at every epoch's start); declared after the buffers it reads, so it goes first.
  std::unique_ptr<CapturedStep> captured_;
  bool warmed_up_ = false;  // this epoch ran its eager step (plans and buffers exist)
  int64_t captures_ = 0, replays_ = 0;
  std::vector<ProgressEvent> pending_;  // step events waiting for their loss
  int64_t step_ = 0, epoch_ = 0, batch_ = 0;
  int64_t skipped_steps_ = 0;  // fp16: steps skipped on overflow, as of the last read
  EvalResult last_eval_;       // the last evaluation, this run's or its checkpoint's
  Target target_ = Target::kNotYet;
  std::chrono::steady_clock::time_point started_;
  const std::atomic<bool>* stop_flag_ = nullptr;
};

}  // namespace torus::worker::train

#include "worker/train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/data/cifar.h"
#include "worker/data/idx.h"
#include "worker/data/jpeg_folder.h"
#include "worker/data/synthetic.h"
#include "worker/train/trainer_internal.h"

namespace torus::worker::train {
namespace {

// Fills empty mean/std from the training set (in-memory sets) or ImageNet's statistics (folders of photos).
void complete_normalization(data::Transform& t, const data::Dataset& train) {
  if (!t.mean.empty() && !t.std.empty()) return;
  if (auto* array = dynamic_cast<const data::ArrayDataset*>(&train)) {
    array->channel_stats(t.mean, t.std);
  } else {
    t.mean = {0.485f, 0.456f, 0.406f};
    t.std = {0.229f, 0.224f, 0.225f};
  }
}
// FNV-1a: a stable fingerprint of the parameter names and shapes.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void validate(const TrainConfig& c) {
  if (c.epochs <= 0)
    throw InvalidArgument("training.epochs: must be a positive integer, got " + std::to_string(c.epochs));
  api::check_phases(c.phases, "training.phases");
  optim::LrSchedule schedule(c.lr_points);  // validates the points
  if (c.label_smoothing < 0 || c.label_smoothing >= 1)
    throw InvalidArgument("training.labelSmoothing: must be in [0, 1), got " + std::to_string(c.label_smoothing));
  if (c.eval_batch_size <= 0) throw InvalidArgument("training.evalBatchSize: must be a positive integer");
  if (c.data.rectangular_validation == data::Rectangular::kOn && c.data.validation_image_size <= 0)
    throw InvalidArgument(
        "training.rectangularValidation: needs training.validationImageSize (the shorter side of every batch), got " +
        std::to_string(c.data.validation_image_size));
  if (c.target_accuracy < 0 || c.target_accuracy > 1)
    throw InvalidArgument("training.targetAccuracy: must be in [0, 1], got " + std::to_string(c.target_accuracy));
}

Datasets load_datasets(const DataConfig& c, uint64_t seed) {
  switch (c.dataset) {
    case api::Dataset::kFashionMnist:
      return {data::load_fashion_mnist(c.path, data::Split::kTrain),
              data::load_fashion_mnist(c.path, data::Split::kVal)};
    case api::Dataset::kCifar10:
      return {data::load_cifar10(c.path, data::Split::kTrain), data::load_cifar10(c.path, data::Split::kVal)};
    case api::Dataset::kImageFolder:
      return {data::JpegFolder::open(c.path, data::Split::kTrain), data::JpegFolder::open(c.path, data::Split::kVal)};
    case api::Dataset::kSynthetic: {
      data::SyntheticSpec spec;
      spec.h = spec.w = c.synthetic_size;
      spec.c = c.synthetic_channels;
      spec.classes = c.synthetic_classes;
      spec.seed = seed;
      spec.n = static_cast<int>(c.synthetic_train);
      auto train = data::make_synthetic(spec);
      // Same class patterns (same seed); the first synthetic_val samples double as the validation set.
      spec.n = static_cast<int>(c.synthetic_val);
      return {train, data::make_synthetic(spec)};
    }
  }
  throw InvalidArgument("data.dataset: unknown kind");
}

Trainer::Trainer(Backend& backend, TrainConfig config, Datasets data, Collectives& collectives,
                 const GradientSyncFactory& sync_factory, TrainObserver* observer)
    : backend_(backend),
      config_(std::move(config)),
      data_(std::move(data)),
      collectives_(collectives),
      observer_(observer) {
  validate(config_);
  if (!data_.train || !data_.val) throw InvalidArgument("trainer: training and validation sets are required");
  const api::ResolvedPhase& first = config_.phases.front();
  config_.model.batch_size = first.per_rank_batch;
  config_.model.image_size = first.image_size;
  config_.model.in_channels = data_.train->channels();
  if (config_.model.num_classes == 0) config_.model.num_classes = data_.train->num_classes();
  if (config_.model.num_classes < data_.train->num_classes())
    throw InvalidArgument("model.numClasses: " + std::to_string(config_.model.num_classes) + " is fewer than the " +
                          std::to_string(data_.train->num_classes()) + " classes of " + data_.train->describe());
  precision_ = precision_plan(config_.precision);
  check_supported(precision_, backend_);
  config_.model.activation_dtype = precision_.activations;
  model_ = std::make_unique<nn::Model>(backend_, config_.model);
  // Every rank starts from rank 0's parameters (they agree already when seeded alike; this makes it certain).
  if (collectives_.world_size() > 1) check_layouts_agree();
  on_arena(model_->context().params, ArenaContent::kParameters,
           [&](std::span<float> values) { collectives_.broadcast(values, 0); });
  if (sync_factory) sync_ = sync_factory(model_->context().grads);
  if (precision_.loss_scaling == LossScaling::kDynamic) backend_.enable_loss_scaling(precision_.loss_scale);
  step_runner_ =
      std::make_unique<TrainStep>(*model_, config_.sgd, config_.label_smoothing, sync_.get(), precision_.loss_scaling);

  complete_normalization(config_.data.transform, *data_.train);
  setup_device();
  loader_ = make_train_loader();
}

std::unique_ptr<data::Loader> Trainer::make_train_loader() const {
  const api::ResolvedPhase& first = config_.phases.front();
  data::LoaderConfig lc;
  lc.mode = Mode::kTrain;
  lc.batch_size = first.per_rank_batch;
  lc.image_size = {first.image_size, first.image_size};
  lc.transform = config_.data.transform;
  lc.seed = config_.seed;
  lc.rank = collectives_.rank();
  lc.world = collectives_.world_size();
  lc.last_batch = data::LastBatch::kDrop;  // whole global batches, as api::steps_per_epoch counts them
  lc.threads = config_.data.loader_threads;
  if (device_plan_.augment == AugmentAt::kDevice) lc.pixels = data::Pixels::kRaw;  // the device augments
  return std::make_unique<data::Loader>(data_.train, lc);
}

void Trainer::setup_device() {
  const SyncCapture sync = sync_ == nullptr      ? SyncCapture::kNoSync
                           : sync_->capturable() ? SyncCapture::kCapturable
                                                 : SyncCapture::kNotCapturable;
  device_plan_ = train::device_plan(backend_.memory_space(), backend_.training_offers(), config_, *data_.train, sync);
  if (collectives_.rank() == 0) {
    for (const std::string& line : train::describe(device_plan_)) TLOG(Info) << line;
  }
  if (device_plan_.staging != Staging::kPinned) return;
  int64_t max_pixels = 0, max_batch = 0;
  for (const api::ResolvedPhase& p : config_.phases) {
    max_batch = std::max<int64_t>(max_batch, p.per_rank_batch);
    max_pixels =
        std::max(max_pixels, int64_t{p.per_rank_batch} * p.image_size * p.image_size * data_.train->channels());
  }
  device_input_ =
      std::make_unique<DeviceInput>(backend_, device_plan_.augment, precision_.activations, max_pixels, max_batch);
  lr_value_ = backend_.allocate(sizeof(float));
  loss_ = backend_.allocate(sizeof(float));
  const int64_t ring = config_.log_every_steps > 0 ? std::min<int64_t>(config_.log_every_steps, 1000) : 50;
  loss_ring_size_ = static_cast<size_t>(ring);
  loss_ring_ = backend_.allocate(loss_ring_size_ * sizeof(float));
}

Trainer::~Trainer() = default;

std::string Trainer::model_signature() const {
  const nn::ModelConfig& m = config_.model;
  std::string layout;
  for (const auto& e : model_->context().params.entries()) layout += e.name + e.logical_shape.str() + ";";
  std::string widths;
  for (int64_t w : m.widths) widths += (widths.empty() ? "" : "-") + std::to_string(w);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(fnv1a(layout)));
  return std::string(api::to_string(m.arch)) + "[" + widths + "] in" + std::to_string(m.in_channels) + " classes" +
         std::to_string(m.num_classes) + " params" + std::to_string(model_->parameter_count()) + " " + hash;
}

double Trainer::lr_now(int64_t batches_in_epoch) const {
  const double fractional = static_cast<double>(epoch_) +
                            static_cast<double>(batch_) / static_cast<double>(std::max<int64_t>(batches_in_epoch, 1));
  double lr = optim::LrSchedule(config_.lr_points).at(fractional);
  if (config_.lr_reference_batch > 0) {
    const int64_t global = int64_t{phase_now().per_rank_batch} * collectives_.world_size();
    lr *= static_cast<double>(global) / static_cast<double>(config_.lr_reference_batch);
  }
  return lr;
}

void Trainer::start_epoch() {
  // A captured step keeps the addresses it recorded: the evaluation since and a new phase's shapes may have moved
  // the layers' buffers, so every epoch warms up eagerly and captures again.
  captured_.reset();
  warmed_up_ = false;
  const api::ResolvedPhase& phase = phase_now();
  loader_->set_batch_size(phase.per_rank_batch);
  loader_->set_image_size({phase.image_size, phase.image_size});
  loader_->start_epoch(epoch_, batch_);
}

RunResult Trainer::run(int64_t max_steps) {
  started_ = Clock::now();
  RunResult result;
  result.left_at_start = left_to_train();
  result.last_eval = last_eval_;  // a run with nothing left reports its checkpoint's evaluation
  const int64_t stop_at = max_steps > 0 ? step_ + max_steps : -1;
  while (epoch_ < config_.epochs && target_ == Target::kNotYet) {
    start_epoch();
    EpochTally tally;
    tally.batches = loader_->batches_in_epoch();
    if (run_steps(stop_at, tally) == Stop::kAgreed) {
      checkpoint_now();
      result.stopped = true;
      break;
    }
    if (batch_ < tally.batches) break;  // stopped by max_steps mid-epoch
    if (end_epoch(tally, result) == Target::kReached) break;
  }
  result.steps = step_;
  result.seconds = seconds_since(started_);
  ProgressEvent finished = progress_event(EventKind::kFinished);
  finished.accuracy = result.last_eval.top1;
  finished.top5 = result.last_eval.top5;
  emit(finished);
  return result;
}

Trainer::Stop Trainer::run_steps(int64_t stop_at, EpochTally& tally) {
  if (device_input_) return run_steps_staged(stop_at, tally);
  while (step_ != stop_at) {
    const auto step_start = Clock::now();
    const double waited_before = loader_->wait_seconds();
    std::optional<data::Batch> batch = loader_->next();
    if (!batch) break;
    const double data_wait = loader_->wait_seconds() - waited_before;
    if (train_step(*batch, step_start, std::max(data_wait, 0.0), tally) == Stop::kAgreed) {
      return Stop::kAgreed;  // run() checkpoints, once
    }
    maybe_checkpoint(false);
  }
  return Stop::kNo;
}

}  // namespace torus::worker::train

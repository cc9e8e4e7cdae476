#include "worker/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/checkpoint_dir.h"
#include "worker/data/cifar.h"
#include "worker/data/idx.h"
#include "worker/data/jpeg_folder.h"
#include "worker/data/synthetic.h"

namespace torus::worker::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

template <typename T>
std::span<const T> as_span(std::span<const std::byte> bytes, const std::string& file, const char* section) {
  if (bytes.size() % sizeof(T) != 0)
    throw CorruptData(file + ": section " + section + " has " + std::to_string(bytes.size()) +
                      " bytes, not a whole number of values");
  return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
}

// FNV-1a: a stable fingerprint of the parameter names and shapes.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

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
  step_runner_ = std::make_unique<TrainStep>(*model_, config_.sgd, config_.label_smoothing, sync_.get(),
                                             precision_.loss_scaling);

  complete_normalization(config_.data.transform, *data_.train);
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
  loader_ = std::make_unique<data::Loader>(data_.train, lc);
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
  const api::ResolvedPhase& phase = phase_now();
  loader_->set_batch_size(phase.per_rank_batch);
  loader_->set_image_size({phase.image_size, phase.image_size});
  loader_->start_epoch(epoch_, batch_);
}

void Trainer::emit(ProgressEvent event) const {
  event.elapsed_seconds = seconds_since(started_);
  if (observer_ != nullptr) observer_->on_event(event);
}

// What one epoch's steps add up to, for its end-of-epoch event and log line.
struct Trainer::EpochTally {
  Clock::time_point start = Clock::now();
  int64_t batches = 0;  // in the epoch
  int64_t images = 0, steps = 0;
  double loss_sum = 0;
  StepSplit split;
};

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

RunResult Trainer::run(int64_t max_steps) {
  started_ = Clock::now();
  RunResult result;
  const int64_t stop_at = max_steps > 0 ? step_ + max_steps : -1;
  while (epoch_ < config_.epochs) {
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

Trainer::Stop Trainer::train_step(const data::Batch& batch, Clock::time_point step_start, double data_wait,
                                  EpochTally& tally) {
  const auto work_start = Clock::now();
  const BatchTensors t = upload_batch(batch, images_, labels_);
  const double lr = lr_now(tally.batches);
  const double loss = step_runner_->run(t.images, t.labels, static_cast<float>(lr));
  const double work = seconds_since(work_start);
  if (!std::isfinite(loss))
    throw Error("training diverged: loss is " + std::to_string(loss) + " at step " + std::to_string(step_) + " (lr " +
                std::to_string(lr) + "); lower the learning rate");
  ++step_;
  ++batch_;
  ++tally.steps;
  tally.images += batch.n;
  tally.loss_sum += loss;
  ProgressEvent e = progress_event(EventKind::kStep);
  e.fractional_epoch = static_cast<double>(epoch_) + static_cast<double>(batch_) / static_cast<double>(tally.batches);
  e.loss = loss;
  e.lr = lr;
  e.images = batch.n;
  e.images_per_second = static_cast<double>(tally.images) / seconds_since(tally.start);
  if (precision_.loss_scaling == LossScaling::kDynamic) record_loss_scale(e);
  // The stop agreement is a collective of this step: a rank that waits in it waits for a peer.
  const auto agree_start = Clock::now();
  const bool stopping = agree_to_stop();
  const double stop_wait = seconds_since(agree_start);
  const TrainStep::Times& times = step_runner_->last_times();
  e.step_seconds = seconds_since(step_start);
  e.data_wait_seconds = data_wait;
  e.comm_wait_seconds = times.comm_wait_seconds + stop_wait;
  e.compute_seconds = std::max(work - times.comm_wait_seconds, 0.0);
  tally.split.add(e);
  emit(e);
  if (config_.log_every_steps > 0 && step_ % config_.log_every_steps == 0) {
    TLOG(Info) << "epoch " << epoch_ << " step " << step_ << " loss " << loss << " lr " << lr << " "
               << static_cast<int64_t>(e.images_per_second) << " img/s";
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
  TLOG(Info) << "epoch " << epoch_ - 1 << " done: train loss " << end.loss << ", "
             << static_cast<int64_t>(end.images_per_second) << " img/s; validation top-1 "
             << result.last_eval.top1 * 100 << "%, loss " << result.last_eval.loss << " (" << seconds_since(started_)
             << " s); " << tally.split.str();
  maybe_checkpoint(true);
  if (config_.target_accuracy > 0 && result.last_eval.top1 >= config_.target_accuracy) {
    result.reached_target = true;
    result.seconds_to_target = seconds_since(started_);
    return Target::kReached;
  }
  return Target::kNotYet;
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

void Trainer::average_bn_statistics() {
  const int world = collectives_.world_size();
  if (world == 1) return;
  on_arena(model_->context().stats, ArenaContent::kOther, [&](std::span<float> stats) {
    collectives_.all_reduce_sum(stats);
    const float inv = 1.0f / static_cast<float>(world);
    for (float& v : stats) v *= inv;
  });
}

void Trainer::on_arena(const Arena& arena, ArenaContent content, const std::function<void(std::span<float>)>& op) {
  const Tensor all = arena.all();
  if (backend_.memory_space() == MemorySpace::kHost) {
    op(all.span());
  } else if (collectives_.world_size() > 1) {
    // Device memory never reaches the host collectives: a copy does (start, restore, evaluation: rare).
    std::vector<float> host(static_cast<size_t>(all.numel()));
    backend_.download(all, host.data());
    op(std::span<float>(host));
    backend_.upload(host.data(), all);
  }
  if (content == ArenaContent::kParameters) backend_.invalidate_weight_shadows();
}

EvalResult Trainer::evaluate() {
  average_bn_statistics();
  data::LoaderConfig lc;
  lc.mode = Mode::kEval;
  lc.batch_size = static_cast<int>(config_.eval_batch_size);
  const int size = static_cast<int>(config_.data.validation_image_size);
  lc.image_size = {size, size};
  lc.transform = config_.data.transform;
  lc.seed = config_.seed;
  lc.rank = collectives_.rank();
  lc.world = collectives_.world_size();
  lc.shuffle = data::Shuffle::kOff;
  lc.rectangular = config_.data.rectangular_validation;
  lc.threads = config_.data.loader_threads;
  data::Loader loader(data_.val, lc);
  loader.start_epoch(0, 0);
  double sums[4] = {0, 0, 0, 0};  // loss sum, top-1, top-5, samples
  Buffer images, labels;
  EvalResult r;
  while (auto batch = loader.next()) {
    r.batch_sizes.push_back({batch->h, batch->w});
    const BatchTensors t = upload_batch(*batch, images, labels);
    TrainStep::EvalCounts c = step_runner_->evaluate(t.images, t.labels);
    sums[0] += c.loss_sum;
    sums[1] += static_cast<double>(c.top1);
    sums[2] += static_cast<double>(c.top5);
    sums[3] += static_cast<double>(c.samples);
  }
  collectives_.all_reduce_sum(std::span<double>(sums, 4));
  r.samples = static_cast<int64_t>(sums[3]);
  if (r.samples > 0) {
    r.loss = sums[0] / sums[3];
    r.top1 = sums[1] / sums[3];
    r.top5 = sums[2] / sums[3];
  }
  return r;
}

void Trainer::maybe_checkpoint(bool epoch_end) {
  const CheckpointConfig& c = config_.checkpoint;
  if (c.dir.empty() || collectives_.rank() != 0) return;
  const bool due = epoch_end ? (c.every_epochs > 0 && epoch_ % c.every_epochs == 0)
                             : (c.every_steps > 0 && step_ % c.every_steps == 0);
  if (due) checkpoint_now();
}

void Trainer::checkpoint_now() {
  const CheckpointConfig& c = config_.checkpoint;
  if (c.dir.empty() || collectives_.rank() != 0) return;
  checkpoint::CheckpointDir dir(c.dir, c.keep);
  const std::string path = dir.path_for(step_);
  const auto start = Clock::now();
  save_checkpoint(path);
  dir.prune();
  ProgressEvent e = progress_event(EventKind::kCheckpoint);
  e.checkpoint_seconds = seconds_since(start);
  e.checkpoint_path = path;
  emit(e);
}

void Trainer::save_checkpoint(const std::string& path) const {
  nn::Context& ctx = model_->context();
  checkpoint::CheckpointWriter w;
  const std::vector<float> params = nn::export_plain(ctx, ctx.params);
  const std::vector<float> stats = nn::export_plain(ctx, ctx.stats);
  const std::vector<float> momentum = nn::export_plain(ctx, step_runner_->optimizer().momentum());
  w.add_section("params", params.data(), params.size() * sizeof(float));
  w.add_section("bn_stats", stats.data(), stats.size() * sizeof(float));
  w.add_section("momentum", momentum.data(), momentum.size() * sizeof(float));
  nlohmann::json names = nlohmann::json::array();
  for (const auto& e : ctx.params.entries()) names.push_back({{"name", e.name}, {"shape", e.logical_shape.str()}});
  // Randomness is a pure function of (seed, epoch, sample index) in the data pipeline and of the seed in the
  // initialization, so (seed, epoch, batch) is the whole RNG state.
  nlohmann::json meta = {{"model_signature", model_signature()},
                         {"step", step_},
                         {"epoch", epoch_},
                         {"batch_in_epoch", batch_},
                         {"seed", config_.seed},
                         {"world_size", collectives_.world_size()},
                         {"rng", "pure function of (seed, epoch, sample index)"},
                         {"parameters", names}};
  if (precision_.loss_scaling == LossScaling::kDynamic) {
    // A resumed fp16 run continues with the scale it had instead of re-learning it through skipped steps.
    const LossScaleState s = backend_.loss_scale_state();
    meta["loss_scale"] = {{"scale", s.scale}, {"good_steps", s.good_steps}, {"skipped", s.skipped}};
  }
  w.set_metadata(meta);
  w.commit(path);
  TLOG(Info) << "checkpoint " << path << " (step " << step_ << ", epoch " << epoch_ << ", batch " << batch_ << ")";
}

void Trainer::restore_checkpoint(const checkpoint::CheckpointReader& reader) {
  checkpoint::check_model_signature(reader, model_signature());
  nn::Context& ctx = model_->context();
  const std::string& file = reader.path();
  try {
    nn::import_plain(ctx, ctx.params, as_span<float>(reader.section("params"), file, "params"));
    nn::import_plain(ctx, ctx.stats, as_span<float>(reader.section("bn_stats"), file, "bn_stats"));
    nn::import_plain(ctx, step_runner_->optimizer().momentum(),
                     as_span<float>(reader.section("momentum"), file, "momentum"));
  } catch (const InvalidArgument& e) {
    throw CorruptData(file + ": " + e.what());
  }
  const nlohmann::json& meta = reader.metadata();
  try {
    step_ = meta.at("step").get<int64_t>();
    epoch_ = meta.at("epoch").get<int64_t>();
    batch_ = meta.at("batch_in_epoch").get<int64_t>();
    const uint64_t seed = meta.at("seed").get<uint64_t>();
    const int world = meta.at("world_size").get<int>();
    if (seed != config_.seed)
      throw CorruptData(file + ": written with seed " + std::to_string(seed) + ", this run uses " +
                        std::to_string(config_.seed));
    if (world != collectives_.world_size() && batch_ != 0) {
      // A mid-epoch position only means something for the same sharding: restart that epoch.
      TLOG(Warn) << file << ": written by " << world << " ranks, now " << collectives_.world_size()
                 << "; restarting epoch " << epoch_ << " from its first batch";
      batch_ = 0;
    }
  } catch (const nlohmann::json::exception& e) {
    throw CorruptData(file + ": metadata lacks the training position: " + e.what());
  }
  restore_loss_scale(meta, file);
  TLOG(Info) << "resumed from " << file << " at step " << step_ << ", epoch " << epoch_ << ", batch " << batch_;
}

void Trainer::restore_loss_scale(const nlohmann::json& meta, const std::string& file) {
  if (precision_.loss_scaling != LossScaling::kDynamic) return;  // fp32/bf16: a saved fp16 scale has no use
  auto it = meta.find("loss_scale");
  if (it == meta.end()) {
    TLOG(Info) << file << ": written without fp16 loss scaling; the scale starts at " << precision_.loss_scale.init_scale;
    return;
  }
  try {
    LossScaleState s;
    s.scale = it->at("scale").get<float>();
    s.good_steps = it->at("good_steps").get<int32_t>();
    s.skipped = it->at("skipped").get<int32_t>();
    backend_.set_loss_scale_state(s);
    skipped_steps_ = s.skipped;
  } catch (const nlohmann::json::exception& e) {
    throw CorruptData(file + ": loss_scale metadata: " + e.what());
  } catch (const InvalidArgument& e) {
    throw CorruptData(file + ": " + e.what());
  }
}

bool Trainer::resume_latest() {
  bool restored = false;
  if (!config_.checkpoint.dir.empty() && collectives_.rank() == 0) {
    checkpoint::CheckpointDir dir(config_.checkpoint.dir, config_.checkpoint.keep);
    if (auto found = dir.latest_valid()) {
      restore_checkpoint(*found->reader);
      restored = true;
    }
  }
  if (collectives_.world_size() == 1) return restored;
  // Only rank 0 reads (the folder need not be shared); everyone takes rank 0's state and position.
  // Position, then fp16's loss scale (every rank must scale, and so skip, alike).
  const bool scaled = precision_.loss_scaling == LossScaling::kDynamic;
  double position[7] = {0, 0, 0, 0, 0, 0, 0};
  if (collectives_.rank() == 0) {
    position[0] = restored ? 1 : 0;
    position[1] = static_cast<double>(step_);
    position[2] = static_cast<double>(epoch_);
    position[3] = static_cast<double>(batch_);
    if (scaled) {
      const LossScaleState s = backend_.loss_scale_state();
      position[4] = s.scale;
      position[5] = s.good_steps;
      position[6] = s.skipped;
    }
  }
  collectives_.all_reduce_sum(std::span<double>(position, 7));
  if (position[0] == 0) return false;
  step_ = static_cast<int64_t>(position[1]);
  epoch_ = static_cast<int64_t>(position[2]);
  batch_ = static_cast<int64_t>(position[3]);
  if (scaled && collectives_.rank() != 0) {
    LossScaleState s;
    s.scale = static_cast<float>(position[4]);
    s.good_steps = static_cast<int32_t>(position[5]);
    s.skipped = static_cast<int32_t>(position[6]);
    backend_.set_loss_scale_state(s);
    skipped_steps_ = s.skipped;
  }
  nn::Context& ctx = model_->context();
  auto from_rank0 = [&](std::span<float> values) { collectives_.broadcast(values, 0); };
  on_arena(ctx.params, ArenaContent::kParameters, from_rank0);
  on_arena(ctx.stats, ArenaContent::kOther, from_rank0);
  on_arena(step_runner_->optimizer().momentum(), ArenaContent::kOther, from_rank0);
  return true;
}

void Trainer::check_layouts_agree() {
  // Native weight layouts depend on the CPU's ISA; averaging gradients of different layouts would be silent
  // garbage, so ranks compare a fingerprint of their arena layout first.
  double mine = 0;
  const Arena& params = model_->context().params;
  for (size_t i = 0; i < params.size(); ++i)
    mine += static_cast<double>(params.entry(i).elements) * static_cast<double>(i + 1);
  double sums[2] = {mine, mine * mine};
  collectives_.all_reduce_sum(std::span<double>(sums, 2));
  const double n = collectives_.world_size();
  if (std::abs(sums[1] * n - sums[0] * sums[0]) > 1e-6 * sums[0] * sums[0])
    throw Error("ranks disagree on the parameter layout (rank " + std::to_string(collectives_.rank()) +
                ": fingerprint " + std::to_string(mine) +
                "): the CPU backend's weight layouts differ between machines with different instruction sets");
}

}  // namespace torus::worker::train

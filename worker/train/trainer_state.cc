#include <cmath>
#include <cstring>
#include <exception>
#include <string>

#include "common/launch/checkpoint_layout.h"
#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/checkpoint_dir.h"
#include "worker/checkpoint/resume_choice.h"
#include "worker/train/trainer_internal.h"

namespace torus::worker::train {
namespace {

template <typename T>
std::span<const T> as_span(std::span<const std::byte> bytes, const std::string& file, const char* section) {
  if (bytes.size() % sizeof(T) != 0)
    throw CorruptData(file + ": section " + section + " has " + std::to_string(bytes.size()) +
                      " bytes, not a whole number of values");
  return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
}

}  // namespace

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
  checkpoint::CheckpointDir dir(launch::run_checkpoint_dir(c.dir, c.run), c.keep);
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
                         {checkpoint::kRunMetadataKey, config_.checkpoint.run},
                         {"world_size", collectives_.world_size()},
                         {"rng", "pure function of (seed, epoch, sample index)"},
                         {"parameters", names}};
  if (last_eval_.samples > 0) {
    // So a run resumed from the end of its training can say how it ended, and whether the target was reached.
    meta["evaluation"] = {{"after_epochs", epoch_},
                          {"top1", last_eval_.top1},
                          {"top5", last_eval_.top5},
                          {"loss", last_eval_.loss},
                          {"samples", last_eval_.samples}};
  }
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
  restore_evaluation(meta, file);
  TLOG(Info) << "resumed from " << file << " at step " << step_ << ", epoch " << epoch_ << ", batch " << batch_;
}

void Trainer::restore_loss_scale(const nlohmann::json& meta, const std::string& file) {
  if (precision_.loss_scaling != LossScaling::kDynamic) return;  // fp32/bf16: a saved fp16 scale has no use
  auto it = meta.find("loss_scale");
  if (it == meta.end()) {
    TLOG(Info) << file << ": written without fp16 loss scaling; the scale starts at "
               << precision_.loss_scale.init_scale;
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

void Trainer::restore_evaluation(const nlohmann::json& meta, const std::string& file) {
  last_eval_ = {};
  target_ = Target::kNotYet;
  const auto it = meta.find("evaluation");
  if (it == meta.end()) return;  // written mid-epoch before any evaluation, or by an older worker
  try {
    last_eval_.top1 = it->at("top1").get<double>();
    last_eval_.top5 = it->at("top5").get<double>();
    last_eval_.loss = it->at("loss").get<double>();
    last_eval_.samples = it->at("samples").get<int64_t>();
    // The target is this run's (a resumed run may ask for more); the evaluation must be of the position restored.
    const bool of_this_position =
        meta.at("batch_in_epoch").get<int64_t>() == 0 && it->at("after_epochs").get<int64_t>() == epoch_;
    if (of_this_position && config_.target_accuracy > 0 && last_eval_.top1 >= config_.target_accuracy)
      target_ = Target::kReached;
  } catch (const nlohmann::json::exception& e) {
    throw CorruptData(file + ": evaluation metadata: " + e.what());
  }
}

std::string_view to_string(LeftToTrain left) {
  switch (left) {
    case LeftToTrain::kSome:
      return "some";
    case LeftToTrain::kNoneAllEpochsDone:
      return "all epochs done";
    case LeftToTrain::kNoneTargetReached:
      return "target reached";
  }
  return "some";
}

LeftToTrain Trainer::left_to_train() const {
  if (epoch_ >= config_.epochs) return LeftToTrain::kNoneAllEpochsDone;
  if (target_ == Target::kReached) return LeftToTrain::kNoneTargetReached;
  return LeftToTrain::kSome;
}

Resumed Trainer::resume() {
  Resumed resumed;
  const CheckpointConfig& c = config_.checkpoint;
  // Rank 0's refusal (resumeFrom naming no checkpoint, a foreign file, a corrupt one) ends every rank alike: it is
  // shared before it is thrown, so no peer waits for rank 0 in the collective below.
  std::exception_ptr refused;
  if (!c.dir.empty() && collectives_.rank() == 0) {
    try {
      checkpoint::ResumeChoice choice = checkpoint::choose_resume(c.dir, c.run, c.resume_from, c.keep);
      resumed.reason = choice.reason;
      resumed.other_runs = std::move(choice.other_runs);
      if (choice.found) {
        restore_checkpoint(*choice.found->reader);
        resumed.from_run = choice.from_run;
        resumed.path = choice.found->path;
      }
    } catch (const Error&) {
      refused = std::current_exception();
    }
  }
  if (share_position(resumed, refused ? Refusal::kRefused : Refusal::kNone) == Refusal::kRefused) {
    if (refused) std::rethrow_exception(refused);
    throw InvalidArgument("rank 0 could not restore the run's starting point (its log says why)");
  }
  resumed.step = step_;
  resumed.epoch = epoch_;
  return resumed;
}

Trainer::Refusal Trainer::share_position(Resumed& resumed, Refusal refusal) {
  if (collectives_.world_size() == 1) return refusal;
  // Only rank 0 reads (the folder need not be shared); everyone takes rank 0's state and position.
  // Position, fp16's loss scale (every rank must scale, and so skip, alike), whether the target was reached.
  const bool scaled = precision_.loss_scaling == LossScaling::kDynamic;
  double position[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (collectives_.rank() == 0) {
    position[8] = refusal == Refusal::kRefused ? 1 : 0;
    position[0] = resumed.from_checkpoint() ? 1 + static_cast<double>(resumed.reason) : 0;
    position[1] = static_cast<double>(step_);
    position[2] = static_cast<double>(epoch_);
    position[3] = static_cast<double>(batch_);
    if (scaled) {
      const LossScaleState s = backend_.loss_scale_state();
      position[4] = s.scale;
      position[5] = s.good_steps;
      position[6] = s.skipped;
    }
    position[7] = target_ == Target::kReached ? 1 : 0;
  }
  collectives_.all_reduce_sum(std::span<double>(position, 9));
  if (position[8] != 0) return Refusal::kRefused;
  if (position[0] == 0) return Refusal::kNone;
  resumed.reason = static_cast<launch::ResumeReason>(static_cast<int>(position[0]) - 1);
  step_ = static_cast<int64_t>(position[1]);
  epoch_ = static_cast<int64_t>(position[2]);
  batch_ = static_cast<int64_t>(position[3]);
  target_ = position[7] != 0 ? Target::kReached : Target::kNotYet;
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
  return Refusal::kNone;
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

// What the trainer runs, as rank 0's effective configuration shows it: built from the config and the precision plan
// the trainer holds, so the log says what trains (not what a job file asked for).
#include <sstream>

#include "common/launch/checkpoint_layout.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string model_line(const nn::ModelConfig& m) {
  std::string widths;
  for (int64_t w : m.widths) widths += (widths.empty() ? "" : ", ") + std::to_string(w);
  return "model: " + std::string(api::to_string(m.arch)) + ", widths [" + widths + "], stem " +
         std::string(api::to_string(m.stem)) + ", pooling " + (m.head_pool == PoolKind::kAvg ? "avg" : "max") +
         ", zero-init residual " + (m.zero_init_residual == nn::ZeroInitResidual::kOn ? "on" : "off") + ", classes " +
         std::to_string(m.num_classes) + ", activations " + dtype_name(m.activation_dtype);
}

std::string data_line(const DataConfig& d) {
  const data::Transform& t = d.transform;
  std::string crop = "none";
  if (t.train_crop == data::TrainCrop::kPadCrop) crop = "pad " + std::to_string(t.pad) + " and crop";
  if (t.train_crop == data::TrainCrop::kRandomResizedCrop) crop = "random-resized, min scale " + number(t.scale_min);
  const std::string synthetic = d.dataset == api::Dataset::kSynthetic
                                    ? " (" + std::to_string(d.synthetic_train) + " training and " +
                                          std::to_string(d.synthetic_val) + " validation images of " +
                                          std::to_string(d.synthetic_classes) + " classes, " +
                                          std::to_string(d.synthetic_channels) + " channel(s))"
                                    : "";
  return "data: " + std::string(api::to_string(d.dataset)) + synthetic + ", loader threads " +
         std::to_string(d.loader_threads) + ", flip " + (t.flip == data::Flip::kHorizontal ? "on" : "off") + ", crop " +
         crop + ", validation image " +
         (d.validation_image_size > 0 ? std::to_string(d.validation_image_size) : std::string("native")) +
         (d.rectangular_validation == data::Rectangular::kOn ? " (rectangular)" : "");
}

std::string optimizer_line(const TrainConfig& t) {
  return "optimizer: sgd, momentum " + number(t.sgd.momentum) + ", nesterov " +
         (t.sgd.nesterov == math::Nesterov::kOn ? "on" : "off") + ", weight decay " + number(t.sgd.weight_decay) +
         (t.sgd.decay_scope == optim::DecayScope::kWeightsOnly ? " (conv and linear weights only)" : " (all)") +
         ", label smoothing " + number(t.label_smoothing);
}

std::string lr_line(const TrainConfig& t) {
  std::string out = "learning rate through (epoch, lr):";
  for (const optim::LrPoint& p : t.lr_points) out += " (" + number(p.epoch) + ", " + number(p.lr) + ")";
  if (t.lr_reference_batch > 0) out += ", times the phase's global batch / " + std::to_string(t.lr_reference_batch);
  if (t.target_accuracy > 0) out += "; stop at top-1 " + number(t.target_accuracy);
  return out;
}

// The rule maybe_checkpoint() applies.
std::string checkpoint_line(const CheckpointConfig& c) {
  if (c.dir.empty()) return "checkpoints: off";
  std::string when;
  if (c.every_epochs > 0) when = "every " + std::to_string(c.every_epochs) + " epoch(s)";
  if (c.every_steps > 0) when += (when.empty() ? "" : " and ") + ("every " + std::to_string(c.every_steps) + " steps");
  if (when.empty()) when = "on stop requests only";
  std::string line =
      "checkpoints: " + launch::run_checkpoint_dir(c.dir, c.run) + ", " + when + ", keep " + std::to_string(c.keep);
  if (!c.resume_from.empty()) line += "; without its own, the run starts from resumeFrom " + c.resume_from;
  return line;
}

}  // namespace

std::vector<std::string> Trainer::describe() const {
  const TrainConfig& t = config_;
  std::vector<std::string> out;
  out.push_back(model_line(model_->config()));
  out.push_back(data_line(t.data));
  out.push_back(optimizer_line(t));
  out.push_back(lr_line(t));
  for (size_t i = 0; i < t.phases.size(); ++i) {
    const api::ResolvedPhase& p = t.phases[i];
    out.push_back("phase " + std::to_string(i) + ": epochs [" + std::to_string(p.from_epoch) + ", " +
                  std::to_string(p.to_epoch) + "), per-rank batch " + std::to_string(p.per_rank_batch) + ", image " +
                  std::to_string(p.image_size));
  }
  out.push_back("precision: " + train::describe(precision_));
  out.push_back("seed: " + std::to_string(t.seed) + " (weights and data order)");
  out.push_back(checkpoint_line(t.checkpoint));
  return out;
}

}  // namespace torus::worker::train

#include "worker/app/job_config.h"

#include <algorithm>

#include "common/api/resolve.h"
#include "common/util/error.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker::app {
namespace {

using train::DataConfig;
using train::TrainConfig;

template <typename T>
T need(const std::optional<T>& v, const char* field) {
  if (!v) throw InvalidArgument(std::string(field) + ": required (apply the defaults first)");
  return *v;
}

nn::ModelConfig model_config(const api::ModelSpec& m) {
  nn::ModelConfig c;
  c.arch = need(m.arch, "spec.model.arch");
  c.widths.assign(m.widths.begin(), m.widths.end());
  c.stem = m.stem.value_or(api::Stem::kCifar);
  c.head_pool = m.pooling.value_or(api::Pooling::kMax) == api::Pooling::kAvg ? PoolKind::kAvg : PoolKind::kMax;
  c.zero_init_residual = m.zero_init_residual.value_or(true) ? nn::ZeroInitResidual::kOn : nn::ZeroInitResidual::kOff;
  if (m.input_channels) c.in_channels = *m.input_channels;
  // Unset (imagefolder): one class per class folder, which the trainer learns from the data set.
  c.num_classes = m.num_classes.value_or(0);
  return c;
}

DataConfig data_config(const api::TrainingJobSpec& spec) {
  const api::DataSpec& d = spec.data;
  DataConfig c;
  c.dataset = need(d.dataset, "spec.data.dataset");
  c.path = d.path;
  if (d.loader_threads) c.loader_threads = *d.loader_threads;
  if (d.synthetic.train_images) c.synthetic_train = *d.synthetic.train_images;
  if (d.synthetic.validation_images) c.synthetic_val = *d.synthetic.validation_images;
  if (d.synthetic.num_classes) c.synthetic_classes = *d.synthetic.num_classes;
  if (d.image_size) c.synthetic_size = *d.image_size;
  if (spec.model.input_channels) c.synthetic_channels = *spec.model.input_channels;
  const api::AugmentationSpec& a = spec.training.augmentation;
  c.transform.flip = a.flip.value_or(false) ? data::Flip::kHorizontal : data::Flip::kOff;
  if (a.random_resized_crop_min_scale) {
    c.transform.train_crop = data::TrainCrop::kRandomResizedCrop;
    c.transform.scale_min = static_cast<float>(*a.random_resized_crop_min_scale);
  } else if (a.crop_padding.value_or(0) > 0) {
    c.transform.train_crop = data::TrainCrop::kPadCrop;
    c.transform.pad = *a.crop_padding;
  }
  c.validation_image_size = api::validation_image_size(spec);
  c.rectangular_validation =
      spec.training.rectangular_validation.value_or(false) ? data::Rectangular::kOn : data::Rectangular::kOff;
  return c;
}

std::vector<optim::LrPoint> lr_points(const api::TrainingSpec& t) {
  const api::LrScheduleSpec& s = t.lr_schedule;
  const auto kind =
      s.type.value_or(s.points.empty() ? api::LrScheduleKind::kOneCycle : api::LrScheduleKind::kPiecewiseLinear);
  if (kind == api::LrScheduleKind::kPiecewiseLinear) {
    std::vector<optim::LrPoint> points;
    for (const api::LrPoint& p : s.points) points.push_back({p.epoch.value_or(0), p.lr.value_or(0)});
    if (points.empty()) throw InvalidArgument("spec.training.lrSchedule.points: required for piecewise-linear");
    return points;
  }
  return optim::LrSchedule::warmup_to_peak(s.initial.value_or(0), need(s.peak, "spec.training.lrSchedule.peak"),
                                           s.warmup_epochs.value_or(0), need(t.epochs, "spec.training.epochs"),
                                           s.final_lr.value_or(0))
      .points();
}

}  // namespace

int threads_for(const api::TrainingJobSpec& spec) {
  return spec.gang.threads_per_process ? *spec.gang.threads_per_process : cpu::default_threads();
}

TrainConfig to_train_config(const api::TrainingJobSpec& spec, int world_size) {
  if (world_size <= 0) throw InvalidArgument("WORLD_SIZE: must be a positive integer");
  const api::TrainingSpec& t = spec.training;
  TrainConfig c;
  c.model = model_config(spec.model);
  c.data = data_config(spec);
  c.epochs = need(t.epochs, "spec.training.epochs");
  c.phases = api::resolve_phases(spec);
  // Evaluation batches hold as many images as the largest training batch of this rank: its activations were sized
  // for that (a fixed 500 would multiply them for ImageNet-sized images, more so in rectangular batches).
  c.eval_batch_size = 0;
  for (const api::ResolvedPhase& p : c.phases)
    c.eval_batch_size = std::max<int64_t>(c.eval_batch_size, p.per_rank_batch);
  c.lr_points = lr_points(t);
  if (t.lr_schedule.reference_batch_size) c.lr_reference_batch = *t.lr_schedule.reference_batch_size;
  const api::OptimizerSpec& o = t.optimizer;
  c.sgd.momentum = static_cast<float>(o.momentum.value_or(0.9));
  c.sgd.nesterov = o.nesterov.value_or(true) ? math::Nesterov::kOn : math::Nesterov::kOff;
  c.sgd.weight_decay = static_cast<float>(o.weight_decay.value_or(5e-4));
  c.sgd.decay_scope =
      o.no_decay_on_norm_and_bias.value_or(true) ? optim::DecayScope::kWeightsOnly : optim::DecayScope::kAll;
  c.label_smoothing = static_cast<float>(t.label_smoothing.value_or(0));
  c.target_accuracy = t.target_accuracy.value_or(0);
  c.seed = static_cast<uint64_t>(t.seed.value_or(0));
  c.model.seed = c.seed;  // the weights' initialization as well as the data order
  c.checkpoint.dir = t.checkpoint.dir;
  c.checkpoint.resume_from = t.checkpoint.resume_from;
  // Unset means never (apply_defaults sets 1 only when everySteps is unset too): everySteps alone must not also
  // checkpoint at every epoch's end.
  c.checkpoint.every_epochs = t.checkpoint.every_epochs.value_or(0);
  if (t.checkpoint.every_steps) c.checkpoint.every_steps = *t.checkpoint.every_steps;
  if (t.checkpoint.keep) c.checkpoint.keep = *t.checkpoint.keep;
  return c;
}

}  // namespace torus::worker::app

#include "common/api/defaults.h"

namespace torus::api {
namespace {

template <class T, class U>
void set_default(std::optional<T>& field, U value) {
  if (!field) field = static_cast<T>(value);
}

void set_default(std::string& field, std::string_view value) {
  if (field.empty()) field = value;
}

void default_gang(GangSpec& g) {
  set_default(g.processes_per_worker, 1);
  set_default(g.device, Device::kCpu);
  if (g.image.empty()) g.image = default_worker_image(*g.device);
}

int32_t default_image_size(Dataset d) {
  switch (d) {
    case Dataset::kFashionMnist:
      return 28;
    case Dataset::kImageFolder:
      return 224;
    case Dataset::kCifar10:
    case Dataset::kSynthetic:
      return 32;
  }
  return 32;
}

void default_data(DataSpec& d) {
  if (!d.dataset) return;
  if (*d.dataset == Dataset::kFashionMnist) set_default(d.path, kFashionMnistPath);
  set_default(d.image_size, default_image_size(*d.dataset));
  if (*d.dataset == Dataset::kSynthetic) {
    set_default(d.synthetic.train_images, 10000);
    set_default(d.synthetic.validation_images, 2000);
    set_default(d.synthetic.num_classes, 10);
  }
}

void default_model(ModelSpec& m, const DataSpec& d) {
  if (m.arch && m.widths.empty()) m.widths = {64, 128, 256, 512};
  if (m.arch) {
    const bool cifar_net = *m.arch == Arch::kResNet9 || d.dataset != Dataset::kImageFolder;
    set_default(m.stem, cifar_net ? Stem::kCifar : Stem::kImageNet);
    set_default(m.pooling, *m.arch == Arch::kResNet9 ? Pooling::kMax : Pooling::kAvg);
  }
  set_default(m.zero_init_residual, false);
  if (!d.dataset) return;
  set_default(m.input_channels, *d.dataset == Dataset::kFashionMnist ? 1 : 3);
  if (*d.dataset == Dataset::kSynthetic && d.synthetic.num_classes)
    set_default(m.num_classes, *d.synthetic.num_classes);
  if (*d.dataset == Dataset::kFashionMnist || *d.dataset == Dataset::kCifar10) set_default(m.num_classes, 10);
}

void default_training(TrainingSpec& t) {
  set_default(t.optimizer.type, OptimizerKind::kSgd);
  set_default(t.optimizer.momentum, 0.9);
  set_default(t.optimizer.nesterov, false);
  set_default(t.optimizer.weight_decay, 5e-4);
  set_default(t.optimizer.no_decay_on_norm_and_bias, true);
  LrScheduleSpec& s = t.lr_schedule;
  set_default(s.type, s.points.empty() ? LrScheduleKind::kOneCycle : LrScheduleKind::kPiecewiseLinear);
  if (*s.type == LrScheduleKind::kOneCycle) {
    set_default(s.warmup_epochs, 0.0);
    set_default(s.initial, 0.0);
    set_default(s.final_lr, 0.0);
  }
  set_default(t.label_smoothing, 0.0);
  set_default(t.precision, Precision::kFp32);
  set_default(t.rectangular_validation, false);
  set_default(t.seed, 0);
  set_default(t.augmentation.flip, true);
  set_default(t.augmentation.crop_padding, 0);
  if (!t.checkpoint.dir.empty()) {
    if (!t.checkpoint.every_epochs && !t.checkpoint.every_steps) t.checkpoint.every_epochs = 1;
    set_default(t.checkpoint.keep, 2);
  }
}

void default_all_reduce(AllReduceSpec& a, const GangSpec& g) {
  set_default(a.algorithm, AllReduceAlgorithm::kAuto);
  set_default(a.bucket_size_mb, 25.0);
  set_default(a.first_bucket_size_mb, 1.0);
  set_default(a.compression, Compression::kNone);
  set_default(a.timeout_seconds, 300);
  // The natural torus: one row per worker pod, its processes along the fast (intra-node) dimension.
  if (*a.algorithm == AllReduceAlgorithm::kTorus2d && !a.grid.x && !a.grid.y && g.workers && g.processes_per_worker) {
    a.grid.x = *g.processes_per_worker;
    a.grid.y = *g.workers;
  }
}

void default_run_policy(RunPolicy& r, const GangSpec& g) {
  set_default(r.restart_policy, RestartPolicy::kNever);
  set_default(r.backoff_limit, 3);
  set_default(r.clean_pod_policy, CleanPodPolicy::kRunning);
  set_default(r.suspend, false);
  set_default(r.managed_by, kDefaultManagedBy);
  // The minMember of the PodGroup the operator makes: only where it makes one (a gang scheduler, no group of yours).
  const SchedulingPolicy& s = r.scheduling_policy;
  if (g.workers && !s.scheduler_name.empty() && s.pod_group.empty())
    set_default(r.scheduling_policy.min_available, *g.workers);
  if (!r.topology.key.empty()) set_default(r.topology.placement, TopologyPlacement::kPreferred);
}

}  // namespace

void apply_defaults(TrainingJobSpec& spec) {
  default_gang(spec.gang);
  default_data(spec.data);
  default_model(spec.model, spec.data);
  default_training(spec.training);
  default_all_reduce(spec.all_reduce, spec.gang);
  default_run_policy(spec.run_policy, spec.gang);
  set_default(spec.metrics_port, kDefaultMetricsPort);
  set_default(spec.rendezvous_port, kDefaultRendezvousPort);
}

void apply_defaults(TrainingJob& job) { apply_defaults(job.spec); }

std::string default_worker_image(Device device, std::string_view cpu_image) {
  std::string image(cpu_image);
  if (device == Device::kGpu) image += kGpuImageTagSuffix;
  return image;
}

TrainingJob with_defaults(TrainingJob job) {
  apply_defaults(job);
  return job;
}

}  // namespace torus::api

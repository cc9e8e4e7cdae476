#pragma once
// A TrainingJob for tests, written as code instead of YAML. It starts as the smallest job that trains (one CPU rank
// of one thread, ResNet-9 [8, 8, 16, 32] on 16x16 synthetic data with one loader thread) and each call sets one
// thing; anything else through spec(). build() returns the job as api::load_job_yaml returns a job file (defaulted,
// or InvalidArgument listing every error); yaml() writes what was set, for a program that reads a job file.
// The YAML tests of tests/api keep testing the parser itself.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "common/api/field_error.h"
#include "common/api/training_job.h"
#include "common/api/validation.h"

namespace torus::test {

class JobBuilder {
 public:
  explicit JobBuilder(std::string name) {
    job_.metadata.name = std::move(name);
    api::TrainingJobSpec& s = job_.spec;
    s.gang.workers = 1;
    s.gang.processes_per_worker = 1;
    s.gang.device = api::Device::kCpu;
    s.gang.threads_per_process = 1;
    s.model.arch = api::Arch::kResNet9;
    s.model.widths = {8, 8, 16, 32};
    s.data.dataset = api::Dataset::kSynthetic;
    s.data.image_size = 16;
    s.data.loader_threads = 1;
  }

  JobBuilder& gang(int32_t workers, int32_t processes_per_worker) {
    job_.spec.gang.workers = workers;
    job_.spec.gang.processes_per_worker = processes_per_worker;
    return *this;
  }
  JobBuilder& classes(int32_t num_classes) {
    job_.spec.model.num_classes = num_classes;
    return *this;
  }
  JobBuilder& input_channels(int32_t channels) {
    job_.spec.model.input_channels = channels;
    return *this;
  }
  JobBuilder& synthetic(int64_t train_images, int64_t validation_images, int32_t num_classes) {
    job_.spec.data.dataset = api::Dataset::kSynthetic;
    job_.spec.data.synthetic = {train_images, validation_images, num_classes};
    return *this;
  }
  JobBuilder& image_folder(std::string path) {
    job_.spec.data.dataset = api::Dataset::kImageFolder;
    job_.spec.data.path = std::move(path);
    return *this;
  }
  JobBuilder& epochs(int32_t epochs) {
    job_.spec.training.epochs = epochs;
    return *this;
  }
  JobBuilder& batch_size(int32_t global) {
    job_.spec.training.batch_size = global;
    return *this;
  }
  // One-cycle LR: `initial` -> `peak` over `warmup_epochs`, then to `final_lr`; unset ones keep their defaults.
  JobBuilder& one_cycle(double peak, std::optional<double> warmup_epochs = std::nullopt,
                        std::optional<double> initial = std::nullopt, std::optional<double> final_lr = std::nullopt) {
    api::LrScheduleSpec& lr = job_.spec.training.lr_schedule;
    lr.type = api::LrScheduleKind::kOneCycle;
    lr.peak = peak;
    lr.warmup_epochs = warmup_epochs;
    lr.initial = initial;
    lr.final_lr = final_lr;
    return *this;
  }
  JobBuilder& checkpoints(std::string dir, int64_t every_steps) {
    job_.spec.training.checkpoint.dir = std::move(dir);
    job_.spec.training.checkpoint.every_steps = every_steps;
    return *this;
  }
  JobBuilder& seed(int64_t seed) {
    job_.spec.training.seed = seed;
    return *this;
  }

  // Everything the calls above do not cover.
  api::TrainingJobSpec& spec() { return job_.spec; }

  // What was set, as a job file would hold it (no defaults).
  const api::TrainingJob& written() const { return job_; }
  std::string yaml() const { return api::to_yaml(job_); }
  // Validated and defaulted, as api::load_job_yaml returns a job file.
  api::TrainingJob build() const {
    const api::FieldErrors errors = api::validate(job_);
    if (!errors.empty()) api::throw_field_errors(errors, job_.metadata.name);
    return api::with_defaults(job_);
  }

 private:
  api::TrainingJob job_;
};

}  // namespace torus::test

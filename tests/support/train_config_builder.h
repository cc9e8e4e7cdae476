#pragma once
// A worker TrainConfig for tests, written as calls instead of field-by-field assignments. It starts as the smallest
// run the trainer tests share: ResNet-9 [8, 16, 32] with 4 classes, on a synthetic set of 256 training and 128
// validation 16x16 images of 4 classes (one loader thread); 1 epoch at per-rank batch 32; evaluation batch 64; no
// step logging; everything else TrainConfig's defaults. Each call sets one thing; config() reaches anything else.
// build() writes the one phase, from epoch 0 to `epochs`, at the image size and per-rank batch set.
// (JobBuilder, job_builder.h, is the counterpart for tests that start from a TrainingJob.)
#include <cstdint>
#include <utility>
#include <vector>

#include "worker/train/config.h"

namespace torus::test {

class TrainConfigBuilder {
 public:
  TrainConfigBuilder() {
    c_.model.arch = api::Arch::kResNet9;
    c_.model.widths = {8, 16, 32};
    c_.data.dataset = api::Dataset::kSynthetic;
    c_.data.synthetic_train = 256;
    c_.data.synthetic_val = 128;
    c_.data.loader_threads = 1;
    c_.eval_batch_size = 64;
    c_.log_every_steps = 0;
    classes(4);
    image_size(16);
  }

  TrainConfigBuilder& widths(std::vector<int64_t> widths) { return set(c_.model.widths, std::move(widths)); }
  TrainConfigBuilder& flip(worker::data::Flip flip) { return set(c_.data.transform.flip, flip); }
  TrainConfigBuilder& epochs(int32_t epochs) { return set(c_.epochs, epochs); }
  TrainConfigBuilder& per_rank_batch(int32_t batch) { return set(per_rank_batch_, batch); }
  // The model's outputs and the synthetic set's labels.
  TrainConfigBuilder& classes(int classes) {
    c_.model.num_classes = classes;
    return set(c_.data.synthetic_classes, classes);
  }
  TrainConfigBuilder& synthetic(int64_t train_images, int64_t validation_images) {
    c_.data.synthetic_train = train_images;
    return set(c_.data.synthetic_val, validation_images);
  }
  // The synthetic images' side and the phase's image size.
  TrainConfigBuilder& image_size(int side) {
    c_.data.synthetic_size = side;
    return set(image_size_, side);
  }
  TrainConfigBuilder& lr(std::vector<worker::optim::LrPoint> points) { return set(c_.lr_points, std::move(points)); }
  TrainConfigBuilder& label_smoothing(float epsilon) { return set(c_.label_smoothing, epsilon); }
  TrainConfigBuilder& seed(uint64_t seed) { return set(c_.seed, seed); }
  TrainConfigBuilder& eval_batch(int64_t batch) { return set(c_.eval_batch_size, batch); }
  TrainConfigBuilder& precision(api::Precision precision) { return set(c_.precision, precision); }

  // Everything the calls above do not cover (but the phases, which build() writes).
  worker::train::TrainConfig& config() { return c_; }

  worker::train::TrainConfig build() const {
    worker::train::TrainConfig c = c_;
    c.phases = {{.from_epoch = 0,
                 .to_epoch = static_cast<int32_t>(c.epochs),
                 .image_size = image_size_,
                 .per_rank_batch = per_rank_batch_}};
    return c;
  }

 private:
  template <class Field, class Value>
  TrainConfigBuilder& set(Field& field, Value value) {
    field = std::move(value);
    return *this;
  }

  worker::train::TrainConfig c_;
  int32_t image_size_ = 16;
  int32_t per_rank_batch_ = 32;
};

}  // namespace torus::test

#pragma once
// ResNets built from the layers: a ResNet-9-style CIFAR net (Page's "bag of tricks" shape with configurable
// widths) and ResNet-18/34/50 with CIFAR or ImageNet stems.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "worker/nn/layers.h"

namespace torus::worker::nn {

// The job's spec.model.arch and spec.model.stem (names: api::to_string). Stem kCifar: one 3x3 conv at full
// resolution; kImageNet: 7x7 stride-2 conv + 3x3 stride-2 max pool.
using api::Arch;
using api::Stem;
// Zero gamma of the BN that feeds each basic/bottleneck block's residual add (Goyal et al.).
enum class ZeroInitResidual : uint8_t { kOn, kOff };

struct ModelConfig {
  Arch arch = Arch::kResNet9;
  // ResNet-9: {prep, stage1, ..., stageK}, residual blocks on the first and last stage (Page: 64-128-256-512;
  // Fashion-MNIST: 8-16-32-64; airbench-like: 64-256-256). ResNet-18/34/50: the four stage widths
  // (default 64-128-256-512; ResNet-50 expands each by 4).
  std::vector<int64_t> widths;
  Stem stem = Stem::kCifar;
  int64_t in_channels = 3;
  int64_t num_classes = 10;  // the trainer reads 0 as "the training set's class count"
  PoolKind head_pool = PoolKind::kMax;  // global pooling before the classifier
  ZeroInitResidual zero_init_residual = ZeroInitResidual::kOn;
  // The input the model is laid out for (backend weight layouts); other sizes run too.
  int64_t batch_size = 128, image_size = 32;
  uint64_t seed = 0;
  // Context::activation_dtype: kF32, or kBF16/kF16 where the backend runs half activations (the GPU engine).
  DType activation_dtype = DType::kF32;
};

class Model {
 public:
  Model(Backend& backend, const ModelConfig& config);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // images (N, H, W, C) in config().activation_dtype -> logits (N, K) fp32. Eval mode normalizes with the running
  // statistics.
  Tensor forward(Tensor images, Mode mode);
  // dlogits (N, K): writes every parameter gradient, announcing each through Context::grad_ready.
  void backward(Tensor dlogits);
  // Re-initializes every parameter and statistic from the seed.
  void init(uint64_t seed);

  Context& context() { return *ctx_; }
  const Context& context() const { return *ctx_; }
  Backend& backend() { return ctx_->backend; }
  const ModelConfig& config() const { return config_; }
  // Logical parameter count (what PyTorch reports), not the padded storage.
  int64_t parameter_count() const;

 private:
  ModelConfig config_;
  std::unique_ptr<Context> ctx_;
  Sequential net_;
};

// An arena of parameters (or anything mirroring them, like momentum) or statistics in plain layouts (conv weights
// (O, I, KH, KW)), entries concatenated in order: what checkpoints and exports hold.
std::vector<float> export_plain(Context& ctx, const Arena& arena);
// The inverse; throws InvalidArgument when the element count does not match the arena's logical size.
void import_plain(Context& ctx, const Arena& arena, std::span<const float> values);

}  // namespace torus::worker::nn

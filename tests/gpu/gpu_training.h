#pragma once
// What the GPU training tests share: the small ResNet-9 they train, and a CUDA backend whose fp32 products are full
// fp32 (TF32 off), so that runs in other precisions or on other ranks compare against an exact fp32 reference.
#include <cstdint>
#include <memory>

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/nn/model.h"

namespace torus::worker::train::testing {

// ResNet-9 [8, 16, 32, 64] laid out for (batch, size, size, 1) images of `classes` classes, seed 5.
inline nn::ModelConfig small_resnet9(int64_t batch, int64_t size, int64_t classes, DType activations = DType::kF32) {
  nn::ModelConfig cfg;
  cfg.arch = api::Arch::kResNet9;
  cfg.widths = {8, 16, 32, 64};
  cfg.in_channels = 1;
  cfg.num_classes = classes;
  cfg.batch_size = batch;
  cfg.image_size = size;
  cfg.seed = 5;
  cfg.activation_dtype = activations;
  return cfg;
}

inline std::unique_ptr<cuda::CudaBackend> exact_fp32_backend(int device,
                                                             cuda::Determinism determinism = cuda::Determinism::kAny) {
  cuda::CudaOptions o;
  o.device = device;
  o.tf32 = cuda::Tf32::kDeny;
  o.determinism = determinism;
  return cuda::make_cuda_backend(o);
}

}  // namespace torus::worker::train::testing

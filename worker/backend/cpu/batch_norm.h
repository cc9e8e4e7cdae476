#pragma once
// Batch norm training (forward with the batch's statistics, backward) on the CPU backend's narrow NHWC activations,
// written by hand. oneDNN 2.6.3's NHWC batch norm on the narrow ResNet-9's 8-32 channels took 1.6-2.2x the time of
// these loops (best of 30, 1 thread, AVX-512 machine, batch 128 with ReLU: 28x28x8 forward 0.67 -> 0.37 ms, backward
// 0.96 -> 0.57 ms; 28x28x16 1.26 -> 0.77 and 1.93 -> 1.17 ms; 7x7x32 0.13 -> 0.06 and 0.22 -> 0.12 ms).
// The forward reads x twice (the moments, then normalize + ReLU); the backward reads x and dy twice (both of its
// sums in one pass, then dx). Vectors of channels per row (GCC vector extensions), chosen at run time: AVX-512 where
// oneDNN runs avx512_core, else AVX2, else SSE (any x86-64).
// Same results as oneDNN's up to rounding: save_var is the biased batch variance, and the fused ReLU's mask is
// recomputed in the backward from x and the saved statistics with the forward's own arithmetic (bit for bit), so no
// workspace is kept.
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// Whether this geometry runs here (else on oneDNN): activations in NHWC of at most kHandMaxChannels channels.
constexpr int64_t kHandMaxChannels = 32;
bool batch_norm_by_hand(const NormGeometry& g);

// y = gamma * (x - mean) / sqrt(var + eps) + beta, then ReLU if g.activation says so; the batch's mean and biased
// variance go to save_mean and save_var (C floats each).
void batch_norm_forward_training(const NormGeometry& g, const float* x, const float* gamma, const float* beta, float* y,
                                 float* save_mean, float* save_var);

// dx, dgamma and dbeta given dy (the gradient of the ReLU's output where g.activation is kRelu).
void batch_norm_backward(const NormGeometry& g, const float* x, const float* dy, const float* gamma, const float* beta,
                         const float* save_mean, const float* save_var, float* dx, float* dgamma, float* dbeta);

// Backend::norm_max_pool_*: the normalization straight into a 2x2 stride-2 max pool, y (N, H/2, W/2, C); the
// backward recomputes each window's winner and mask from x. Where batch_norm_by_hand, and H and W are at least 2.
// Two passes each way, over x (and the pooled dy): the normalized tensor is never stored or read.
bool batch_norm_max_pool_by_hand(const NormGeometry& g);
void batch_norm_max_pool_forward_training(const NormGeometry& g, const float* x, const float* gamma,
                                          const float* beta, float* y, float* save_mean, float* save_var);
void batch_norm_max_pool_backward(const NormGeometry& g, const float* x, const float* dy, const float* gamma,
                                  const float* beta, const float* save_mean, const float* save_var, float* dx,
                                  float* dgamma, float* dbeta);

}  // namespace torus::worker::cpu

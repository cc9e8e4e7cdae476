#pragma once
// Launchers of Torus's own CUDA kernels (everything cuDNN/cuBLAS do not do). Each takes explicit device buffers,
// never allocates, and enqueues on the stream it is given. Activation-like buffers carry a DType (fp32, bf16,
// fp16: stored as 16-bit patterns); parameters, gradients and statistics are always fp32. The per-element math
// is in kernel_math.h (TORUS_HD), shared with the CPU tests.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "worker/backend/cuda/kernel_math.h"
#include "worker/tensor/tensor.h"

namespace torus::worker::cuda {

// dst[i] = src[i] converted between dtypes (same dtype: a plain copy).
void launch_convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, cudaStream_t s);
void launch_fill(void* dst, DType type, int64_t n, float value, cudaStream_t s);

// --- elementwise ---------------------------------------------------------------------------------------
void launch_relu_forward(const void* x, void* y, DType type, int64_t n, cudaStream_t s);
void launch_relu_backward(const void* y, const void* dy, void* dx, DType type, int64_t n, cudaStream_t s);
void launch_add(const void* a, const void* b, void* y, DType type, int64_t n, bool relu, cudaStream_t s);
// In place y = relu(y), writing one bit per element (word i / 32, bit i % 32) for the backward.
void launch_relu_with_mask(void* y, uint32_t* mask, DType type, int64_t n, cudaStream_t s);
inline int64_t relu_mask_words(int64_t n) { return kmath::mask_words(n); }

// --- batch norm statistics (C values) ---------------------------------------------------------------------
void launch_var_from_invstd(float* inout, int64_t c, float eps, cudaStream_t s);
void launch_invstd_from_var(const float* var, float* invstd, int64_t c, float eps, cudaStream_t s);

// --- batch norm over NHWC data: x (m, c) rows of channels, m = N * H * W (norm_kernels.cu) ----------------------
// Each launcher takes a scratch buffer of at least bn_scratch_bytes(m, c) (per-row-slice partials and per-channel
// coefficients); statistics, gamma, beta and their gradients are fp32 (c values); x, y, dy, dx share `type`.
size_t bn_scratch_bytes(int64_t m, int64_t c);
// save_mean / save_var: the batch's mean and biased variance; running_* += momentum * (batch - running), with the
// unbiased variance; y = (x - mean) / sqrt(var + eps) * gamma + beta, joined with `join`.
// What the normalize pass joins (both optional): y += residual (a ResNet block's join, same dtype as y); with
// relu_mask (c a multiple of 32: kmath::bn_apply_writes_mask), y = relu(y) and relu_mask (relu_mask_words(m * c)
// words) gets its mask.
struct BnJoin {
  const void* residual = nullptr;
  uint32_t* relu_mask = nullptr;
};
void launch_bn_forward_training(const void* x, void* y, DType type, int64_t m, int64_t c, float eps, float momentum,
                                const float* gamma, const float* beta, float* save_mean, float* save_var,
                                float* running_mean, float* running_var, BnJoin join, void* scratch, cudaStream_t s);
// y = (x - mean) / sqrt(var + eps) * gamma + beta, then a ReLU when `relu`.
void launch_bn_forward_inference(const void* x, void* y, DType type, int64_t m, int64_t c, float eps,
                                 const float* gamma, const float* beta, const float* mean, const float* var, bool relu,
                                 void* scratch, cudaStream_t s);
// dx, and dgamma / dbeta overwritten, from the forward's saved mean and 1 / sqrt(var + eps), joined with `join`.
// The backward of a joined layer (both optional): with relu_mask, dy is the ReLU's output gradient, taken through
// the mask; dresidual gets the gradient that reaches the residual (dy through the mask), in the dx pass.
struct BnJoinGrad {
  const uint32_t* relu_mask = nullptr;
  void* dresidual = nullptr;
};
void launch_bn_backward(const void* x, const void* dy, BnJoinGrad join, void* dx, DType type, int64_t m, int64_t c,
                        const float* save_mean, const float* invstd, const float* gamma, float* dgamma, float* dbeta,
                        void* scratch, cudaStream_t s);

// --- linear ------------------------------------------------------------------------------------------------
// y (N, out) += b broadcast over rows.
void launch_bias_add(float* y, const float* b, int64_t n, int64_t out, cudaStream_t s);

// --- loss and metrics --------------------------------------------------------------------------------------
struct LossScalars {
  float loss = 0;         // mean loss of the batch
  int32_t bad_label = 0;  // 1 + a sample whose label is out of range; 0 when all are valid (memset resets)
  int32_t correct = 0;    // count_top_k's answer
};
// Per-row loss into row_loss (N); dlogits (N, K) (may be null) scaled by *grad_scale when grad_scale is not null.
// Then the mean over rows (fixed-order tree, deterministic) into out->loss.
void launch_softmax_xent(const float* logits, const int32_t* labels, int64_t n, int64_t k, float smoothing,
                         const float* grad_scale, float* dlogits, float* row_loss, LossScalars* out, cudaStream_t s);
void launch_count_top_k(const float* logits, const int32_t* labels, int64_t n, int64_t k, int top, LossScalars* out,
                        cudaStream_t s);

// --- optimizer ---------------------------------------------------------------------------------------------
// One SGD step over n elements; skipped entirely when `skip` is not null and *skip != 0 (fp16 overflow step). The
// learning rate is *lr_value when that is not null (read when the kernel runs: a captured step follows a schedule).
void launch_sgd(float* w, const float* g, float* v, int64_t n, float lr, const float* lr_value, float momentum,
                float weight_decay, math::Nesterov nesterov, const int32_t* skip, cudaStream_t s);

// The fused update of many tensors (kmath::sgd_chunks): block b runs chunks[b]; same skip and lr_value as launch_sgd.
void launch_sgd_chunks(const kmath::SgdChunk* chunks, int64_t n_chunks, float* w, const float* g, float* v, float lr,
                       const float* lr_value, float momentum, math::Nesterov nesterov, const int32_t* skip,
                       cudaStream_t s);

// --- dynamic loss scaling -----------------------------------------------------------------------------------
// g *= 1 / state->scale, setting state->found_inf on any inf/NaN.
void launch_unscale(float* g, int64_t n, kmath::LossScaleState* state, cudaStream_t s);
// One thread runs kmath::loss_scale_update: no host synchronization in the step.
void launch_loss_scale_update(kmath::LossScaleState* state, const kmath::LossScaleConfig& config, cudaStream_t s);

// --- data augmentation ----------------------------------------------------------------------------------------
using kmath::AugmentSpec;
// images u8 (N, H, W, C) -> out (N, H, W, C) in `out_type`; sample i draws its augmentation from
// (spec.seed, first_sample + i).
void launch_augment(const uint8_t* images, void* out, DType out_type, int64_t n, int64_t h, int64_t w, int64_t c,
                    const AugmentSpec& spec, uint64_t first_sample, cudaStream_t s);

}  // namespace torus::worker::cuda

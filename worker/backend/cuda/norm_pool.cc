// Batch norm (Torus's NHWC kernels, norm_kernels.cu; cuDNN's fused BN + ReLU for fp16, with its fallbacks) and
// pooling (cuDNN) of the CUDA backend (cuda_backend.h).
#include <algorithm>

#include "common/log/log.h"
#include "worker/backend/cuda/backend_internal.h"
#include "worker/backend/cuda/norm_math.h"

namespace torus::worker::cuda {
namespace {

cudnnPoolingMode_t cudnn_pool_mode(PoolMode m) {
  switch (m) {
    case PoolMode::kMax:
      return CUDNN_POOLING_MAX;
    case PoolMode::kMaxDeterministic:
      return CUDNN_POOLING_MAX_DETERMINISTIC;
    case PoolMode::kAverageExcludePadding:
      return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  }
  throw InvalidArgument("cuda backend: unknown pooling mode " + std::to_string(static_cast<int>(m)));
}

// 1/sqrt(var + eps) needs eps > 0 where a channel is constant; cuDNN's minimum binds only cuDNN's fused path.
void expect_positive_eps(const NormGeometry& g) {
  if (!(g.eps > 0.0f)) throw InvalidArgument("batch norm: eps must be positive, got " + std::to_string(g.eps));
}

}  // namespace

// --- batch norm -------------------------------------------------------------------------------------------------
CudaBackend::NormPlan& CudaBackend::norm_plan(const NormGeometry& g, DType type) {
  auto key = std::make_pair(g, type);
  auto it = norm_plans_.find(key);
  if (it != norm_plans_.end()) return *it->second;
  expect_positive_eps(g);
  expect_not_capturing("planning a new batch norm shape");
  auto p = std::make_unique<NormPlan>();
  set_nhwc(p->x, type, g.n, g.h, g.w, g.c);
  CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p->stats.get(), p->x.get(), CUDNN_BATCHNORM_SPATIAL));
  CUDNN_CHECK(cudnnSetActivationDescriptor(p->relu.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  // cuDNN documents BN + ReLU fusion for NHWC fp16 in its persistent kernels; fp32 and bf16 run our BN with the ReLU
  // and its 1-bit mask in the normalize pass (whole warps of channels) or in a kernel after it.
  const bool fusable = g.activation == Activation::kRelu && type == DType::kF16 &&
                       options_.bn_fusion == BnFusion::kCudnn && g.c % 4 == 0 && g.eps >= CUDNN_BN_MIN_EPSILON;
  if (fusable) {
    const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
    const auto ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    size_t fwd = 0, bwd = 0, reserve = 0;
    const bool ok = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                        cudnn_.get(), mode, ops, p->x.get(), nullptr, p->x.get(), p->stats.get(), p->relu.get(),
                        &fwd) == CUDNN_STATUS_SUCCESS &&
                    cudnnGetBatchNormalizationBackwardExWorkspaceSize(cudnn_.get(), mode, ops, p->x.get(), p->x.get(),
                                                                      p->x.get(), nullptr, p->x.get(), p->stats.get(),
                                                                      p->relu.get(), &bwd) == CUDNN_STATUS_SUCCESS &&
                    cudnnGetBatchNormalizationTrainingExReserveSpaceSize(cudnn_.get(), mode, ops, p->relu.get(),
                                                                         p->x.get(), &reserve) == CUDNN_STATUS_SUCCESS;
    if (ok) {
      p->fusion = BnFusion::kCudnn;
      p->mode = mode;
      // A null workspace makes the Ex calls behave like the plain ones (no NHWC kernel): always pass one.
      p->fwd_bytes = std::max<size_t>(fwd, 256);
      p->bwd_bytes = std::max<size_t>(bwd, 256);
      p->reserve_bytes = reserve;
    }
  }
  return *norm_plans_.emplace(key, std::move(p)).first->second;
}

size_t CudaBackend::norm_workspace_bytes(const NormGeometry& g) {
  if (g.activation != Activation::kRelu) return 0;
  // The geometry carries no dtype: size for both the fp32 mask and cuDNN's fused reserve space (fp16 data).
  const size_t mask = static_cast<size_t>(relu_mask_words(g.shape().numel())) * sizeof(uint32_t);
  const size_t reserve = options_.bn_fusion == BnFusion::kCudnn ? norm_plan(g, DType::kF16).reserve_bytes : 0;
  return std::max({mask, reserve, kStashBytes});
}

void CudaBackend::expect_norm_tensors(const NormGeometry& g, Tensor x, std::initializer_list<Tensor> activations,
                                      std::initializer_list<Tensor> per_channel) const {
  expect_elements(x, g.shape().numel(), "batch norm input");
  for (Tensor t : activations) {
    expect_dtype(t, x.dtype(), "batch norm activation (y, dy, dx, residual)");
    expect_elements(t, g.shape().numel(), "batch norm activation (y, dy, dx, residual)");
  }
  for (Tensor t : per_channel) {
    expect_dtype(t, DType::kF32, "batch norm statistic");
    expect_elements(t, g.c, "batch norm statistic");
  }
}

void CudaBackend::expect_mask_workspace(const NormGeometry& g, Tensor workspace_t) const {
  const size_t need = static_cast<size_t>(relu_mask_words(g.shape().numel())) * sizeof(uint32_t);
  if (workspace_t.bytes() < need)
    throw InvalidArgument("batch norm + ReLU: workspace of " + std::to_string(workspace_t.bytes()) +
                          " bytes, the mask needs " + std::to_string(need) + " (norm_workspace_bytes)");
}

const float* CudaBackend::invstd_of(const NormGeometry& g, Tensor save_var) {
  auto* invstd = static_cast<float*>(scratch(kNormInvStd, static_cast<size_t>(g.c) * sizeof(float)));
  launch_invstd_from_var(save_var.f32(), invstd, g.c, g.eps, stream_.get());
  return invstd;
}

void CudaBackend::norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y,
                                        Tensor save_mean, Tensor save_var, Tensor running_mean, Tensor running_var,
                                        float momentum, Tensor workspace_t) {
  const DType type = x.dtype();
  expect_norm_tensors(g, x, {y}, {gamma, beta, save_mean, save_var, running_mean, running_var});
  NormPlan& p = norm_plan(g, type);
  const float one = 1.0f, zero = 0.0f;
  if (p.fusion == BnFusion::kCudnn) {
    const cudnnStatus_t status = cudnnBatchNormalizationForwardTrainingEx(
        cudnn_.get(), p.mode, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &one, &zero, p.x.get(), x.data(), nullptr, nullptr,
        p.x.get(), y.data(), p.stats.get(), gamma.data(), beta.data(), momentum, running_mean.data(),
        running_var.data(), g.eps, save_mean.data(), save_var.data(), p.relu.get(), workspace(p.fwd_bytes), p.fwd_bytes,
        workspace_t.data(), p.reserve_bytes);
    if (refused(status)) {
      // Sizes were accepted at plan time but this shape is refused at run time: BN, then our ReLU with a mask
      // (the layer's workspace is sized for both), from now on.
      TLOG(Warn) << "batch norm " << g.shape().str() << ": cuDNN's fused BN + ReLU refused the shape ("
                 << cudnnGetErrorString(status) << "); running BN and a separate ReLU";
      p.fusion = BnFusion::kOff;
      p.mode = CUDNN_BATCHNORM_SPATIAL;
    } else {
      CUDNN_CHECK(status);
      stash_[workspace_t.data()] = {x.data(), y.data(), BnFusion::kCudnn};
      // cuDNN saved 1/sqrt(var + eps); the interface promises the biased variance.
      launch_var_from_invstd(save_var.f32(), g.c, g.eps, stream_.get());
    }
  }
  if (p.fusion == BnFusion::kOff) {
    const bool relu = g.activation == Activation::kRelu;
    auto* mask = relu ? static_cast<uint32_t*>(workspace_t.data()) : nullptr;
    // The ReLU and its mask in the normalize pass where the channels are whole warps, else a kernel after it.
    const bool mask_in_pass = relu && kmath::bn_apply_writes_mask(g.c);
    launch_bn_forward_training(x.data(), y.data(), type, g.rows(), g.c, g.eps, momentum, gamma.f32(), beta.f32(),
                               save_mean.f32(), save_var.f32(), running_mean.f32(), running_var.f32(),
                               BnJoin{nullptr, mask_in_pass ? mask : nullptr},
                               scratch(kNormScratch, bn_scratch_bytes(g.rows(), g.c)), stream_.get());
    if (relu) {
      if (!mask_in_pass) launch_relu_with_mask(y.data(), mask, type, y.numel(), stream_.get());
      stash_[workspace_t.data()] = {x.data(), y.data(), BnFusion::kOff};
    }
  }
}

void CudaBackend::norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean,
                                         Tensor var, Tensor y) {
  const DType type = x.dtype();
  expect_dtype(y, type, "batch norm output");
  expect_elements(x, g.shape().numel(), "batch norm input");
  expect_elements(y, g.shape().numel(), "batch norm output");
  launch_bn_forward_inference(x.data(), y.data(), type, g.rows(), g.c, g.eps, gamma.f32(), beta.f32(), mean.f32(),
                              var.f32(), g.activation == Activation::kRelu,
                              scratch(kNormScratch, bn_scratch_bytes(g.rows(), g.c)), stream_.get());
}

void CudaBackend::norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                                Tensor save_var, Tensor workspace_t, Tensor dx, Tensor dgamma, Tensor dbeta) {
  const DType type = x.dtype();
  expect_norm_tensors(g, x, {dy, dx}, {gamma, beta, save_mean, save_var, dgamma, dbeta});
  NormPlan& p = norm_plan(g, type);
  const float* invstd = invstd_of(g, save_var);
  Stash forward;  // only ReLU layers record their forward (their workspace is unique per layer)
  if (g.activation == Activation::kRelu) {
    auto it = stash_.find(workspace_t.data());
    if (it == stash_.end())
      throw InvalidArgument("batch norm backward: no training forward recorded for this workspace");
    forward = it->second;
  }
  FusedBackward fused = FusedBackward::kRefused;
  // A plan already switched off (another layer of this shape was refused) goes straight to the fallback.
  if (forward.norm == BnFusion::kCudnn && p.fusion == BnFusion::kCudnn) {
    const float one = 1.0f, zero = 0.0f;
    const cudnnStatus_t status = cudnnBatchNormalizationBackwardEx(
        cudnn_.get(), p.mode, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &one, &zero, &one, &zero, p.x.get(), x.data(),
        p.x.get(), forward.y, p.x.get(), dy.data(), nullptr, nullptr, p.x.get(), dx.data(), p.stats.get(), gamma.data(),
        beta.data(), dgamma.data(), dbeta.data(), g.eps, save_mean.data(), invstd, p.relu.get(), workspace(p.bwd_bytes),
        p.bwd_bytes, workspace_t.data(), p.reserve_bytes);
    if (!refused(status)) {
      CUDNN_CHECK(status);
      fused = FusedBackward::kRan;
    } else {
      // Like the forward's fallback: this call takes the ReLU's gradient from the output; later forwards of the
      // shape run BN and our ReLU with a mask.
      TLOG(Warn) << "batch norm " << g.shape().str() << ": cuDNN's fused BN + ReLU backward refused the shape ("
                 << cudnnGetErrorString(status) << "); running a separate ReLU backward and BN backward";
      p.fusion = BnFusion::kOff;
      p.mode = CUDNN_BATCHNORM_SPATIAL;
    }
  }
  const NormBackward path = cuda::norm_backward(g.activation, forward.norm, fused);
  if (path == NormBackward::kFused) return;
  norm_backward_unfused(g, path, forward, x, dy, gamma, save_mean, invstd, workspace_t, dx, dgamma, dbeta);
}

void CudaBackend::norm_backward_unfused(const NormGeometry& g, NormBackward path, const Stash& forward, Tensor x,
                                        Tensor dy, Tensor gamma, Tensor save_mean, const float* invstd,
                                        Tensor workspace_t, Tensor dx, Tensor dgamma, Tensor dbeta) {
  const DType type = x.dtype();
  const void* grad = dy.data();
  const uint32_t* mask = nullptr;
  if (path == NormBackward::kReluFromMask) {
    // The BN backward reads dy through the mask: no masked copy of dy.
    mask = static_cast<const uint32_t*>(workspace_t.data());
  } else if (path == NormBackward::kReluFromOutput) {
    void* masked = scratch(kNormDy, dy.bytes());
    launch_relu_backward(forward.y, dy.data(), masked, type, dy.numel(), stream_.get());
    grad = masked;
  }
  launch_bn_backward(x.data(), grad, BnJoinGrad{mask, nullptr}, dx.data(), type, g.rows(), g.c, save_mean.f32(), invstd,
                     gamma.f32(), dgamma.f32(), dbeta.f32(), scratch(kNormScratch, bn_scratch_bytes(g.rows(), g.c)),
                     stream_.get());
}

// A block's join, y = relu(bn(x) + residual), in the normalize pass with the ReLU's mask (a separate ReLU-with-mask
// kernel where the channels are not whole warps); cuDNN's fused fp16 BN + ReLU is not used here: it has no add in
// the form the layer asks for, and ours runs every dtype the same way.
void CudaBackend::norm_add_relu_forward_training(const NormGeometry& g, Tensor x, Tensor residual, Tensor gamma,
                                                 Tensor beta, Tensor y, Tensor save_mean, Tensor save_var,
                                                 Tensor running_mean, Tensor running_var, float momentum,
                                                 Tensor workspace_t) {
  if (g.activation != Activation::kRelu)
    throw InvalidArgument("batch norm + add + ReLU: the geometry's activation must be kRelu (the ReLU after the add)");
  expect_positive_eps(g);
  expect_norm_tensors(g, x, {y, residual}, {gamma, beta, save_mean, save_var, running_mean, running_var});
  expect_mask_workspace(g, workspace_t);
  auto* mask = static_cast<uint32_t*>(workspace_t.data());
  const bool mask_in_pass = kmath::bn_apply_writes_mask(g.c);
  launch_bn_forward_training(x.data(), y.data(), x.dtype(), g.rows(), g.c, g.eps, momentum, gamma.f32(), beta.f32(),
                             save_mean.f32(), save_var.f32(), running_mean.f32(), running_var.f32(),
                             BnJoin{residual.data(), mask_in_pass ? mask : nullptr},
                             scratch(kNormScratch, bn_scratch_bytes(g.rows(), g.c)), stream_.get());
  if (!mask_in_pass) launch_relu_with_mask(y.data(), mask, x.dtype(), y.numel(), stream_.get());
}

// dresidual = dy through the forward's mask, dx through the normalization, both in the dx pass (y is not read: the
// mask holds what the backward needs of it).
void CudaBackend::norm_add_relu_backward(const NormGeometry& g, Tensor x, Tensor /*y*/, Tensor dy, Tensor gamma,
                                         Tensor /*beta*/, Tensor save_mean, Tensor save_var, Tensor workspace_t,
                                         Tensor dx, Tensor dresidual, Tensor dgamma, Tensor dbeta) {
  expect_norm_tensors(g, x, {dy, dx, dresidual}, {gamma, save_mean, save_var, dgamma, dbeta});
  expect_mask_workspace(g, workspace_t);
  launch_bn_backward(x.data(), dy.data(),
                     BnJoinGrad{static_cast<const uint32_t*>(workspace_t.data()), dresidual.data()}, dx.data(),
                     x.dtype(), g.rows(), g.c, save_mean.f32(), invstd_of(g, save_var), gamma.f32(), dgamma.f32(),
                     dbeta.f32(), scratch(kNormScratch, bn_scratch_bytes(g.rows(), g.c)), stream_.get());
}

// --- pooling ------------------------------------------------------------------------------------------------------
CudaBackend::PoolPlan& CudaBackend::pool_plan(const PoolGeometry& g, DType type) {
  auto key = std::make_pair(g, type);
  auto it = pool_plans_.find(key);
  if (it != pool_plans_.end()) return *it->second;
  if (g.out_h() <= 0 || g.out_w() <= 0) throw InvalidArgument("pool: input " + g.input_shape().str() + " too small");
  expect_not_capturing("planning a new pooling shape");
  auto p = std::make_unique<PoolPlan>();
  set_nhwc(p->x, type, g.n, g.h, g.w, g.c);
  set_nhwc(p->y, type, g.n, g.out_h(), g.out_w(), g.c);
  const cudnnPoolingMode_t mode = cudnn_pool_mode(pool_mode(g.kind, options_.determinism));
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(p->pool.get(), mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(g.kh),
                                          static_cast<int>(g.kw), static_cast<int>(g.pad), static_cast<int>(g.pad),
                                          static_cast<int>(g.stride), static_cast<int>(g.stride)));
  return *pool_plans_.emplace(key, std::move(p)).first->second;
}

// cuDNN's pooling backward reads the forward's x and y, which the interface does not pass: the forward records
// them under the layer's workspace (whose address is unique per layer), so the workspace itself holds nothing.
size_t CudaBackend::pool_workspace_bytes(const PoolGeometry&) { return kStashBytes; }

void CudaBackend::pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor workspace_t) {
  expect_dtype(y, x.dtype(), "pool output");
  expect_elements(x, g.input_shape().numel(), "pool input");
  expect_elements(y, g.output_shape().numel(), "pool output");
  PoolPlan& p = pool_plan(g, x.dtype());
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnPoolingForward(cudnn_.get(), p.pool.get(), &one, p.x.get(), x.data(), &zero, p.y.get(), y.data()));
  stash_[workspace_t.data()] = {x.data(), y.data()};
}

void CudaBackend::pool_backward(const PoolGeometry& g, Tensor dy, Tensor workspace_t, Tensor dx) {
  expect_dtype(dx, dy.dtype(), "pool input gradient");
  expect_elements(dy, g.output_shape().numel(), "pool output gradient");
  expect_elements(dx, g.input_shape().numel(), "pool input gradient");
  auto it = stash_.find(workspace_t.data());
  if (it == stash_.end()) throw InvalidArgument("pool backward: no pool forward recorded for this workspace");
  PoolPlan& p = pool_plan(g, dy.dtype());
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnPoolingBackward(cudnn_.get(), p.pool.get(), &one, p.y.get(), it->second.y, p.y.get(), dy.data(),
                                   p.x.get(), it->second.x, &zero, p.x.get(), dx.data()));
}

}  // namespace torus::worker::cuda

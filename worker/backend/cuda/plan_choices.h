#pragma once
// The CUDA backend's choices that depend only on options and geometry, as pure functions (no CUDA include:
// tests/gpu_math runs them on the CPU). norm_pool.cc maps the pooling mode to cuDNN's constant and runs the batch
// norm backward path chosen here; cuda_backend.cc applies Determinism to the conv algorithm search.
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cuda {

// kRequired (TORUS_CUDNN_DETERMINISTIC=1): every conv pass skips the algorithms cuDNN reports as non-deterministic
// (those that accumulate with atomics), and max pooling uses CUDNN_POOLING_MAX_DETERMINISTIC. Batch norm needs no
// switch: Torus's kernels merge their partial sums in a fixed order either way.
enum class Determinism : uint8_t { kAny, kRequired };
// Batch norm runs on Torus's own kernels (norm_kernels.cu); kCudnn (TORUS_CUDNN_BN_FUSION, default on) lets one case
// go to cuDNN instead: BN + ReLU in fp16 (CUDNN_BATCHNORM_OPS_BN_ACTIVATION, NHWC persistent kernels), where the
// channels are a multiple of 4, eps is at least CUDNN_BN_MIN_EPSILON and cuDNN accepts the shape. Everything else,
// and kOff, runs our BN with our ReLU and its 1-bit mask.
enum class BnFusion : uint8_t { kCudnn, kOff };

// cuDNN's pooling modes this backend uses.
enum class PoolMode : uint8_t { kMax, kMaxDeterministic, kAverageExcludePadding };

constexpr PoolMode pool_mode(PoolKind kind, Determinism determinism) {
  if (kind == PoolKind::kAvg) return PoolMode::kAverageExcludePadding;
  return determinism == Determinism::kRequired ? PoolMode::kMaxDeterministic : PoolMode::kMax;
}

// Whether cuDNN ran the fused BN + ReLU backward or refused the shape at run time (NOT_SUPPORTED or one of its 3xxx
// reasons).
enum class FusedBackward : uint8_t { kRan, kRefused };

// How batch norm's backward goes through the ReLU of a BN + ReLU layer.
enum class NormBackward : uint8_t {
  kPlain,           // no ReLU: our BN backward
  kFused,           // cuDNN's fused BN + ReLU backward (the forward ran fused)
  kReluFromMask,    // the forward ran our BN and ReLU, which wrote the mask: our BN backward reads dy through it
  kReluFromOutput,  // the forward ran fused (no mask written) but the fused backward was refused: the ReLU's
                    // gradient from the forward's output (y > 0, our kernel), then our BN backward
};

// `forward`: how this layer's training forward ran; `fused`: the fused backward's outcome, when it was tried.
constexpr NormBackward norm_backward(Activation activation, BnFusion forward, FusedBackward fused) {
  if (activation != Activation::kRelu) return NormBackward::kPlain;
  if (forward == BnFusion::kOff) return NormBackward::kReluFromMask;
  return fused == FusedBackward::kRan ? NormBackward::kFused : NormBackward::kReluFromOutput;
}

}  // namespace torus::worker::cuda

#pragma once
// The CUDA backend's choices that depend only on options and geometry, as pure functions (no CUDA include:
// tests/gpu_math runs them on the CPU). cuda_backend.cc maps the results to cuDNN's constants.
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cuda {

// Deterministic: skip conv algorithms cuDNN reports as non-deterministic (atomics in backward-filter) and use
// CUDNN_POOLING_MAX_DETERMINISTIC for max pooling.
enum class Determinism : uint8_t { kAny, kRequired };
// cuDNN's fused BN + ReLU (BN_ACTIVATION, NHWC fp16 only) instead of BN followed by our ReLU-with-mask kernel.
enum class BnFusion : uint8_t { kCudnn, kOff };

// cuDNN's pooling modes this backend uses.
enum class PoolMode : uint8_t { kMax, kMaxDeterministic, kAverageExcludePadding };

constexpr PoolMode pool_mode(PoolKind kind, Determinism determinism) {
  if (kind == PoolKind::kAvg) return PoolMode::kAverageExcludePadding;
  return determinism == Determinism::kRequired ? PoolMode::kMaxDeterministic : PoolMode::kMax;
}

// Whether cuDNN ran the fused BN + ReLU backward or refused the shape (a NOT_SUPPORTED status at run time).
enum class FusedBackward : uint8_t { kRan, kRefused };

// How batch norm's backward goes through the ReLU of a BN + ReLU layer.
enum class NormBackward : uint8_t {
  kPlain,           // no ReLU: cuDNN's BN backward
  kFused,           // cuDNN's fused BN + ReLU backward (the forward ran fused)
  kReluFromMask,    // our mask (the forward ran BN, then our ReLU kernel), then BN backward
  kReluFromOutput,  // the forward ran fused (no mask written) but the fused backward was refused: the ReLU's
                    // gradient from the forward's output (y > 0), then BN backward
};

// `forward`: how this layer's training forward ran; `fused`: the fused backward's outcome, when it was tried.
constexpr NormBackward norm_backward(Activation activation, BnFusion forward, FusedBackward fused) {
  if (activation != Activation::kRelu) return NormBackward::kPlain;
  if (forward == BnFusion::kOff) return NormBackward::kReluFromMask;
  return fused == FusedBackward::kRan ? NormBackward::kFused : NormBackward::kReluFromOutput;
}

}  // namespace torus::worker::cuda

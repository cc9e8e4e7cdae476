#pragma once
// Scalar formulas shared by the CPU backend and CUDA kernels, so CPU tests execute the same math the GPU runs.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TORUS_HD __host__ __device__
#else
#define TORUS_HD
#endif

namespace torus::worker::math {

enum class Nesterov : unsigned char { kOff, kOn };

// One SGD step on one element, PyTorch's formulation: g += wd * w; v = mu * v + g;
// w -= lr * (nesterov ? g + mu * v : v).
TORUS_HD inline void sgd_element(float& w, float g, float& v, float lr, float momentum, float weight_decay,
                                 Nesterov nesterov) {
  g += weight_decay * w;
  v = momentum * v + g;
  float step = nesterov == Nesterov::kOn ? g + momentum * v : v;
  w -= lr * step;
}

// Label-smoothed one-hot target of class k for a sample of class y among `classes`.
TORUS_HD inline float smoothed_target(int k, int y, float smoothing, int classes) {
  return (k == y ? 1.0f - smoothing : 0.0f) + smoothing / static_cast<float>(classes);
}

// d(mean loss)/d(logit) for probability p and smoothed target t over a batch of n.
TORUS_HD inline float xent_logit_grad(float p, float t, float inv_n) { return (p - t) * inv_n; }

// Running statistic update (PyTorch convention: the variance fed in is the unbiased batch variance).
TORUS_HD inline float running_update(float running, float batch, float momentum) {
  return (1.0f - momentum) * running + momentum * batch;
}

// 1/sqrt(var + eps): what normalizes a channel of (biased) variance var.
TORUS_HD inline float invstd_from_var(float var, float eps) { return 1.0f / sqrtf(var + eps); }

// Batch norm's affine map of one element given its channel's mean and 1/sqrt(var + eps).
TORUS_HD inline float bn_affine(float x, float mean, float invstd, float gamma, float beta) {
  return (x - mean) * invstd * gamma + beta;
}

// Top-k: does class j rank above the label's logit? A tie goes to the lower class index, as PyTorch's argmax and
// topk take the first maximum: a constant output counts as predicting class 0.
TORUS_HD inline bool ranks_above(float zj, int j, float target, int label) {
  return zj > target || (zj == target && j < label);
}
// Classes of the row z (k logits) that rank above the label; the sample counts for top-k when this is below k.
TORUS_HD inline int64_t classes_above(const float* z, int64_t k, int label) {
  const float target = z[label];
  int64_t above = 0;
  for (int64_t j = 0; j < k; ++j) above += ranks_above(z[j], static_cast<int>(j), target, label) ? 1 : 0;
  return above;
}

// --- plain data the backend interface and the CUDA kernels share (kernel_math.h runs the formulas on them) -----
// Dynamic loss scaling (fp16): the knobs and the state of the state machine (kernel_math.h: loss_scale_update).
struct LossScaleConfig {
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;  // finite steps in a row before the scale grows
  float min_scale = 1.0f;
  float max_scale = 16777216.0f;  // 2^24
};

struct LossScaleState {
  float scale = 65536.0f;
  int32_t good_steps = 0;  // finite steps since the last change
  int32_t found_inf = 0;   // set by the unscale pass of this step; read by the optimizer (skip the step)
  int32_t skipped = 0;     // steps skipped since the start
};

// Fused SGD: a tensor of the parameter arena: its elements [offset, offset + elements) and its weight decay (0 for BN
// and biases). Gradients and momentum mirror the arena, so one offset addresses all three.
struct SgdSegment {
  int64_t offset = 0, elements = 0;
  float weight_decay = 0;
};

// What the device-side augmentation does: spec.training.augmentation's cropPadding (a random translation of up to
// max_shift pixels) and flip, then the per-channel normalization.
struct AugmentSpec {
  static constexpr int kMaxChannels = 4;
  float mean[kMaxChannels] = {0, 0, 0, 0};
  float inv_std[kMaxChannels] = {1, 1, 1, 1};
  int32_t max_shift = 0;  // random translation of up to this many pixels, padded with pixel value 0
  bool flip = false;      // random horizontal flip
  uint64_t seed = 0;
};

}  // namespace torus::worker::math

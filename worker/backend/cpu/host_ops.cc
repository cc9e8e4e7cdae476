#include "worker/backend/cpu/host_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/util/error.h"
#include "worker/backend/math.h"

namespace torus::worker::cpu {

void expect_elements(Tensor t, int64_t elements, const char* what) {
  if (t.numel() != elements)
    throw InvalidArgument(std::string("cpu backend: ") + what + " has " + std::to_string(t.numel()) +
                          " elements, expected " + std::to_string(elements));
}

namespace {

// Labels are checked before the parallel loop: an exception must not leave an OpenMP region.
void check_labels(const int32_t* y, int64_t n, int64_t classes) {
  for (int64_t i = 0; i < n; ++i)
    if (y[i] < 0 || y[i] >= classes)
      throw InvalidArgument("labels[" + std::to_string(i) + "]: label " + std::to_string(y[i]) + " outside [0, " +
                            std::to_string(classes) + ")");
}

float xent_row(const float* z, int32_t label, int k, float smoothing, float inv_n, float* dz) {
  float zmax = *std::max_element(z, z + k);
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
  const double log_sum = std::log(sum);
  double loss = 0;
  for (int j = 0; j < k; ++j) {
    const double log_p = static_cast<double>(z[j] - zmax) - log_sum;
    const float t = math::smoothed_target(j, label, smoothing, k);
    loss -= t * log_p;
    if (dz) dz[j] = math::xent_logit_grad(static_cast<float>(std::exp(log_p)), t, inv_n);
  }
  return loss;
}

}  // namespace

  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) {
    const int64_t n = logits.shape()[0], k = logits.shape()[1];
    expect_elements(labels, n, "labels");
    if (!dlogits.empty()) expect_elements(dlogits, n * k, "logit gradient");
    const float* z = logits.f32();
    const int32_t* y = labels.i32();
    float* dz = dlogits.empty() ? nullptr : dlogits.f32();
    check_labels(y, n, k);
    const float inv_n = 1.0f / static_cast<float>(n);
    double total = 0;
#pragma omp parallel for reduction(+ : total)
    for (int64_t i = 0; i < n; ++i)
      total += xent_row(z + i * k, y[i], static_cast<int>(k), smoothing, inv_n, dz ? dz + i * k : nullptr);
    return total / static_cast<double>(n);
  }

  int64_t count_top_k(Tensor logits, Tensor labels, int k) {
    const int64_t n = logits.shape()[0], classes = logits.shape()[1];
    expect_elements(labels, n, "labels");
    const float* z = logits.f32();
    const int32_t* y = labels.i32();
    check_labels(y, n, classes);
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) correct += math::classes_above(z + i * classes, classes, y[i]) < k ? 1 : 0;
    return correct;
  }

  void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h) {
    expect_elements(grad, param.numel(), "gradient");
    expect_elements(momentum_buffer, param.numel(), "momentum buffer");
    float* w = param.f32();
    const float* g = grad.f32();
    float* v = momentum_buffer.f32();
    const int64_t n = param.numel();
    const float lr = h.lr_now();
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) math::sgd_element(w[i], g[i], v[i], lr, h.momentum, h.weight_decay, h.nesterov);
  }

void update_running(const NormGeometry& g, Tensor mean, Tensor var, Tensor running_mean, Tensor running_var,
                    float momentum) {
  const float m = static_cast<float>(g.rows());
  const float unbias = m > 1 ? m / (m - 1) : 1.0f;
  float *rm = running_mean.f32(), *rv = running_var.f32();
  const float *bm = mean.f32(), *bv = var.f32();
  for (int64_t c = 0; c < g.c; ++c) {
    rm[c] = math::running_update(rm[c], bm[c], momentum);
    rv[c] = math::running_update(rv[c], bv[c] * unbias, momentum);
  }
}

}  // namespace torus::worker::cpu

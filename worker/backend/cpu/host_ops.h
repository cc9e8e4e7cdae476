#pragma once
// The CPU backend's hand-written ops where oneDNN has no primitive: the loss and top-k over a few thousand logits,
// the SGD update over each parameter, and batch norm's running statistics (C values).
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits);
int64_t count_top_k(Tensor logits, Tensor labels, int k);
void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h);
// running = (1 - momentum) * running + momentum * batch statistic; the batch variance given is biased (what the
// training forward saves) and enters unbiased, as in PyTorch.
void update_running(const NormGeometry& g, Tensor mean, Tensor var, Tensor running_mean, Tensor running_var,
                    float momentum);

// Throws InvalidArgument naming `what` unless `t` holds exactly `elements` elements (the ops' shape check).
void expect_elements(Tensor t, int64_t elements, const char* what);

}  // namespace torus::worker::cpu

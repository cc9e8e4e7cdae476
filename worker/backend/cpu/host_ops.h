#pragma once
// The CPU backend's hand-written ops where oneDNN has no primitive: the loss and top-k over a few thousand logits,
// and the SGD update over each parameter.
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits);
int64_t count_top_k(Tensor logits, Tensor labels, int k);
void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h);

// Throws InvalidArgument naming `what` unless `t` holds exactly `elements` elements (the ops' shape check).
void expect_elements(Tensor t, int64_t elements, const char* what);

}  // namespace torus::worker::cpu

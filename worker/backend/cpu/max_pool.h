#pragma once
// Max pooling on NHWC fp32, written by hand for the CPU backend. oneDNN 2.6.3's jit:avx2 pooling on NHWC took
// 5.9 ms forward and 4.2 ms backward (best of 13, 1 thread) for a 2x2/2 pool of (128, 28, 28, 16), 1.6 MB in:
// pooling was a fifth of the narrow ResNet-9's step. These loops keep a vector of channels in registers over each
// window (branch-free compares, the winner's window position as one byte); the 2x2/2 pool has an AVX2 path
// (eight channels per vector, the window unrolled, positions packed to bytes with AVX2 packs), chosen at run time.
// Packing with __builtin_convertvector instead (GCC 12 converts lane by lane) made that forward 2.4x slower: 0.94 vs
// 0.40 ms for (128, 28, 28, 16), best of 30, 1 thread.
// Same results as oneDNN's: padding never wins, ties go to the first maximum in (kh, kw) order, and the gradient
// goes to that element only.
#include <cstddef>
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// The workspace holds each output's window position (one byte): windows of up to 256 elements.
bool max_pool_by_hand(const PoolGeometry& g);
size_t max_pool_workspace_bytes(const PoolGeometry& g);
void max_pool_forward(const PoolGeometry& g, const float* x, float* y, uint8_t* workspace);
void max_pool_backward(const PoolGeometry& g, const float* dy, const uint8_t* workspace, float* dx);

}  // namespace torus::worker::cpu

#pragma once
// Backward weights of 3x3 stride-1 padding-1 convolutions on small images (under winograd.h's 7 pixels a side), by
// hand on AVX2: the narrow ResNet-9's 64 -> 64 residual layers at 3x3. oneDNN 2.6.3's direct kernel spent 0.89 ms a
// call there (batch 128, 1 thread, Zen 5 under ONEDNN_MAX_CPU_ISA=AVX2): 95 GFLOP/s counting the taps that land on
// padding, about 57 counting only the products it needs. Here: 0.55 ms; the step 2% shorter (4,570 -> 4,680 img/s,
// medians of 3 runs each, alternating).
//
// Per tap, dw[tap] (C_in x C_out) is a sum over the rows where the tap lands inside the image (4 of the 9 output
// pixels for a corner tap of a 3x3 image, 6 for an edge, 9 for the centre) of x(pixel + tap) times dy(pixel), over
// every image: a product with K = images x those pixels, computed in blocks of 4 input channels x 16 output
// channels held in registers for all of K (products of padding never computed). Images are split between threads
// in contiguous ranges, each summing into its own dw, then added in thread order.
#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// Whether this geometry's backward weights runs here: 3x3, stride 1, padding 1, input channels a multiple of 4 and
// output channels of 16, at most 256 a side, an output under 7 pixels a side (larger ones: winograd.h), on a CPU
// where oneDNN runs avx2 but not avx512_core. Activations in their own layouts (NHWC below 64 channels, nChw8c from
// 64 on).
bool small_conv_weights_by_hand(const ConvGeometry& g);

// x (N, H, W, C_in), dy (N, H, W, C_out) -> dw (3, 3, C_in, C_out) (hwio), overwritten.
void small_conv_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw);

}  // namespace torus::worker::cpu

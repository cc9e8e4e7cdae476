#pragma once
// Winograd F(2x2, 3x3) and F(4x4, 3x3) (winograd_tile_outputs) for 3x3 stride-1 padding-1 convolutions, by hand, on
// AVX2 (where oneDNN 2.6.3 has no Winograd convolution and its direct kernels reach about half of a core's FMA rate).
// F(4x4) is the same with 6x6 patches, 36 points and 4x4 outputs (winograd_f4.h). Each 2x2 block of outputs (a tile) is
// computed from its 4x4 input patch with 16 products per input and output channel pair instead of 36: the patch is
// transformed (B^T d B, additions only), the 16 transformed points are 16 small matrix products with the transformed
// weights (G g G^T), and the 2x2 outputs come back by A^T m A. Backward data is the forward on dy with the weights
// flipped and transposed; backward weights sums the transformed inputs times the transformed output gradients (A dy
// A^T) over the tiles, then G^T du G. Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks" (2016).
//
// Per image, tiles are taken in blocks of a few: their transformed patches, products and outputs stay in L1 (backward
// weights: chunks of tiles, see kChunkBytes). Images are split between threads in contiguous ranges; backward weights
// sums per thread, then in thread order.
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// Whether this geometry runs here (else on oneDNN or narrow_conv.h): 3x3, stride 1, padding 1, input channels a
// multiple of 8 and output channels a multiple of 16 (the forward's products take two 8-float vectors at a time;
// backward data, whose output is the input side, one), at most 256 channels a side (the transformed weights, 4 MiB
// at 256, are read again for every few tiles), on a CPU where oneDNN runs avx2 but not avx512_core, and an output of
// at least kWinogradMinSide pixels a side (smaller ones waste most of their tiles). Activations come and go in their
// own layouts (staging.h): NHWC below 64 channels, nChw8c from 64 on, on either side. Such a geometry's weights live
// as (kh, kw, C_in, C_out), oneDNN's hwio. On AVX2 every such layer of the narrow ResNet-9 and ResNet-18 ran faster
// here than on oneDNN 2.6.3's direct kernels (worker/backend/cpu/winograd.cc has the figures).
bool winograd_by_hand(const ConvGeometry& g);

// Outputs per tile side of g's forward and backward data: 4 (F(4x4, 3x3): 36 products per 16 outputs and channel
// pair where F(2x2, 3x3) takes 64) from 8 output pixels a side while the transformed weights stay under 2.5 MiB,
// else 2. Backward weights always takes F(2x2, 3x3).
int64_t winograd_tile_outputs(const ConvGeometry& g);

// x (N, H, W, C_in), w (3, 3, C_in, C_out) -> y (N, H, W, C_out), activations in their own layouts.
void winograd_forward(const ConvGeometry& g, const float* x, const float* w, float* y);
// dy (N, H, W, C_out), w (3, 3, C_in, C_out) -> dx (N, H, W, C_in).
void winograd_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx);
// Whether backward weights runs here too: winograd_by_hand and at least 16 input channels (at 8, 28x28, oneDNN's
// direct kernel was as fast).
bool winograd_backward_weights_by_hand(const ConvGeometry& g);
// x (N, H, W, C_in), dy (N, H, W, C_out) -> dw (3, 3, C_in, C_out), overwritten.
void winograd_backward_weights(const ConvGeometry& g, const float* x, const float* dy, float* dw);

}  // namespace torus::worker::cpu

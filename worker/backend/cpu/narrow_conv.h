#pragma once
// Passes of the narrow NHWC layers' 3x3 stride-1 convolutions, written by hand: the forward of the narrow ResNet-9's
// stem (1 -> 8 channels), first layer (8 -> 16) at 28x28 and its 16 -> 16 and 16 -> 32 layers at 14x14, and the
// 8 -> 16 layer's backward data, where oneDNN 2.6.3's
// NHWC kernels reached 17-83 GFLOP/s of a core's ~175 (1 thread, batch 128, AVX-512 Sapphire Rapids, inside a
// training step: 8 -> 16 forward 2.3-2.6 ms, backward data 3.6-4.8, the stem's 14 MFLOP 0.63-0.73). Backward weights
// runs on oneDNN, which converts the weights from this layout (narrow_conv.cc says why).
//
// Forward: each image is copied into a zero-padded scratch ((H + 2) x (W + 2) x C_in, in cache), so the loop has no borders.
// A block of output pixels x all output channels stays in vector registers (GCC vector extensions, 16 floats), and
// each of the 9 * C_in taps adds one weight vector times the broadcast input. Images are split between threads in
// contiguous ranges, and the next image's input is prefetched while one computes. Backward data: below. On CPUs where
// oneDNN runs below avx512_core, winograd.h runs these layers (and oneDNN the stem): the same loops on 8-float AVX2
// vectors were no faster than oneDNN's AVX2 kernels in a step (ONEDNN_MAX_CPU_ISA=AVX2, per step: 16 -> 32 4.5 vs
// 2.9 ms, 8 -> 16 3.8 vs 3.6, 16 -> 16 even on a Sapphire Rapids; 2.1 vs 1.7, 2.3 vs 2.4, 2.4-3.1 vs 2.5 on a Zen 5).
#include <cstdint>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// Whether the forward of this geometry runs here (else on oneDNN): 3x3, stride 1, padding 1, NHWC on both sides, on
// a CPU where oneDNN runs avx512_core, and a channel pair of the list in narrow_conv.cc (those measured faster than
// oneDNN). Such a geometry's weights live as (kh, kw, C_in, C_out), oneDNN's hwio.
bool narrow_conv_by_hand(const ConvGeometry& g);

// x (N, H, W, C_in), w (kh, kw, C_in, C_out) -> y (N, H, W, C_out).
void narrow_conv_forward(const ConvGeometry& g, const float* x, const float* w, float* y);

// Whether backward data of this geometry runs here: the 8 -> 16 layer (3x3, stride 1, padding 1) on AVX-512.
bool narrow_conv_backward_data_by_hand(const ConvGeometry& g);
// dy (N, H, W, C_out), w (kh, kw, C_in, C_out) -> dx (N, H, W, C_in).
void narrow_conv_backward_data(const ConvGeometry& g, const float* dy, const float* w, float* dx);

}  // namespace torus::worker::cpu

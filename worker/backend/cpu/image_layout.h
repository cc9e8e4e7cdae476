#pragma once
// Where the 8-channel vectors of one (H, W, C) image lie in the activation's own layout (staging.h), for the
// hand-written AVX2 kernels (winograd.cc, small_conv.cc), which run only where channel_block() is 8: NHWC (a pixel's
// channels together) below kBlockedMinChannels channels, nChw8c (eight channels innermost, then the pixels, then the
// blocks of eight) from there on.
#include <cstdint>

#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {

// The offset of channel j of pixel (r, c) is r * row + c * pixel + (j / 8) * vec + j % 8; for a vector of 8
// channels starting at a multiple of 8, r * row + c * pixel + j / 8 * vec.
struct ImageLayout {
  static constexpr int64_t kBlock = 8;
  int64_t pixel, row, vec;
  static ImageLayout of(int64_t h, int64_t w, int64_t c) {
    if (blocked_channels(c)) return {kBlock, w * kBlock, h * w * kBlock};
    return {c, w * c, kBlock};
  }
  int64_t at(int64_t r, int64_t col) const { return r * row + col * pixel; }
  int64_t channel(int64_t j) const { return j / kBlock * vec + j % kBlock; }
  bool nhwc() const { return vec == kBlock; }
};

// Whether the hand-written AVX2 kernels run on this CPU: AVX2 and FMA, with oneDNN below avx512_core (channels
// blocked by ImageLayout::kBlock; on AVX-512 narrow_conv.h and oneDNN run these layers). Decided once per process.
inline bool hand_avx2_kernels() {
  static const bool yes =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && channel_block() == ImageLayout::kBlock;
  return yes;
}

}  // namespace torus::worker::cpu

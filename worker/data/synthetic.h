#pragma once
// A synthetic, learnable image set, deterministic from a seed (tests, benchmarks, smoke runs without data).
//
//   auto ds = make_synthetic({.n = 1024, .h = 32, .w = 32, .c = 3, .classes = 10, .seed = 7});
//
// Class k is a 2-D sinusoidal grating with its own frequencies, phase and per-channel tint; each sample adds
// uniform noise of +-`noise` levels and a random phase shift. The frequency survives flips and small
// crops, so a small conv net drives the loss down within an epoch or two.
#include <cstdint>
#include <memory>

#include "worker/data/dataset.h"

namespace torus::worker::data {

struct SyntheticSpec {
  int n = 1024;
  int h = 32;
  int w = 32;
  int c = 3;
  int classes = 10;
  uint64_t seed = 0;
  int noise = 32;  // pixel levels, 0..255
};

// Throws InvalidArgument naming the field on a non-positive size or class count.
std::shared_ptr<ArrayDataset> make_synthetic(const SyntheticSpec& spec);

}  // namespace torus::worker::data

#include "worker/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "common/util/error.h"
#include "worker/data/sampler.h"

namespace torus::worker::data {
namespace {

struct ClassPattern {
  double fx, fy;  // cycles per image
  double phase;
  double tint[4];
};

double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

void check_positive(const char* field, int value) {
  if (value < 1)
    throw InvalidArgument(std::string("synthetic.") + field + ": must be >= 1, got " + std::to_string(value));
}

ClassPattern pattern_for(uint64_t seed, int k) {
  ClassPattern p{};
  // Distinct (fx, fy) pairs for the first classes, drawn from a 5 x 5 grid of frequencies.
  const uint64_t shuffle = mix_seed(seed, 0xC1A55);
  const int cell = static_cast<int>((static_cast<uint64_t>(k) * 7 + shuffle % 25) % 25);
  p.fx = 1 + cell % 5;
  p.fy = cell / 5;
  p.phase = 2 * std::numbers::pi * unit(mix_seed(seed, 0xFA5E, static_cast<uint64_t>(k)));
  for (int ch = 0; ch < 4; ++ch) {
    p.tint[ch] = 0.5 + 0.5 * unit(mix_seed(seed, 0x7147, static_cast<uint64_t>(k), static_cast<uint64_t>(ch)));
  }
  return p;
}

}  // namespace

std::shared_ptr<ArrayDataset> make_synthetic(const SyntheticSpec& spec) {
  check_positive("n", spec.n);
  check_positive("h", spec.h);
  check_positive("w", spec.w);
  check_positive("c", spec.c);
  check_positive("classes", spec.classes);
  if (spec.noise < 0 || spec.noise > 255) {
    throw InvalidArgument("synthetic.noise: expected [0, 255], got " + std::to_string(spec.noise));
  }
  std::vector<ClassPattern> patterns;
  for (int k = 0; k < spec.classes; ++k) patterns.push_back(pattern_for(spec.seed, k));
  std::vector<uint8_t> pixels(static_cast<size_t>(spec.n) * spec.h * spec.w * spec.c);
  std::vector<int32_t> labels(static_cast<size_t>(spec.n));
  for (int i = 0; i < spec.n; ++i) {
    const uint64_t sample_seed = mix_seed(spec.seed, 0x5A3B1E, static_cast<uint64_t>(i));
    const int k = static_cast<int>(sample_seed % static_cast<uint64_t>(spec.classes));
    labels[static_cast<size_t>(i)] = k;
    const ClassPattern& p = patterns[static_cast<size_t>(k)];
    const double shift = 0.6 * (unit(mix_seed(sample_seed, 1)) - 0.5);
    uint8_t* dst = pixels.data() + static_cast<size_t>(i) * spec.h * spec.w * spec.c;
    for (int y = 0; y < spec.h; ++y) {
      for (int x = 0; x < spec.w; ++x) {
        const double wave = std::sin(2 * std::numbers::pi * (p.fx * x / spec.w + p.fy * y / spec.h) + p.phase + shift);
        for (int ch = 0; ch < spec.c; ++ch) {
          const size_t at = (static_cast<size_t>(y) * spec.w + x) * spec.c + ch;
          const uint64_t r = mix_seed(sample_seed, at);
          const double noise = spec.noise * (2 * unit(r) - 1);
          const double v = 128 + 100 * p.tint[ch % 4] * wave + noise;
          dst[at] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
        }
      }
    }
  }
  return std::make_shared<ArrayDataset>("synthetic(seed " + std::to_string(spec.seed) + ")", spec.n, spec.h, spec.w,
                                        spec.c, spec.classes, std::move(pixels), std::move(labels));
}

}  // namespace torus::worker::data

#include "worker/data/image.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/util/error.h"
#include "worker/data/sampler.h"

namespace torus::worker::data {
namespace {

// Uniform doubles in [0, 1) from a seed; a few draws per sample, so a tiny generator is enough.
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : state_(seed) {}
  double next() {
    state_ = mix_seed(state_, 0xA5A5);
    return static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }
  double between(double lo, double hi) { return lo + (hi - lo) * next(); }
  int int_between(int lo, int hi) {  // inclusive
    return lo + std::min(hi - lo, static_cast<int>(next() * (hi - lo + 1)));
  }

 private:
  uint64_t state_;
};

Region whole(ImageSize src) { return {0, 0, static_cast<float>(src.w), static_cast<float>(src.h)}; }

Region random_resized_crop(ImageSize src, const Transform& t, Uniform& rng) {
  const double area = static_cast<double>(src.h) * src.w;
  const double log_lo = std::log(t.ratio_min), log_hi = std::log(t.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.between(t.scale_min, t.scale_max);
    const double aspect = std::exp(rng.between(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= src.w && h <= src.h) {
      const int y = rng.int_between(0, src.h - h);
      const int x = rng.int_between(0, src.w - w);
      return {static_cast<float>(x), static_cast<float>(y), static_cast<float>(w), static_cast<float>(h)};
    }
  }
  // Fallback as torchvision: a centered crop with the aspect clamped to the allowed range.
  const double in_ratio = static_cast<double>(src.w) / src.h;
  double w = src.w, h = src.h;
  if (in_ratio < t.ratio_min) {
    h = std::round(w / t.ratio_min);
  } else if (in_ratio > t.ratio_max) {
    w = std::round(h * t.ratio_max);
  }
  return {static_cast<float>((src.w - w) / 2), static_cast<float>((src.h - h) / 2), static_cast<float>(w),
          static_cast<float>(h)};
}

Region pad_crop(ImageSize src, int pad, Uniform& rng) {
  const int x = rng.int_between(0, 2 * pad) - pad;
  const int y = rng.int_between(0, 2 * pad) - pad;
  return {static_cast<float>(x), static_cast<float>(y), static_cast<float>(src.w), static_cast<float>(src.h)};
}

Region centered_aspect(ImageSize src, ImageSize out, float fraction) {
  const double aspect = static_cast<double>(out.w) / out.h;
  double w = src.w, h = src.h;
  if (w / h > aspect) {
    w = h * aspect;
  } else {
    h = w / aspect;
  }
  w *= fraction;
  h *= fraction;
  return {static_cast<float>((src.w - w) / 2), static_cast<float>((src.h - h) / 2), static_cast<float>(w),
          static_cast<float>(h)};
}

// For one output coordinate: two source taps and the weight of the second; tap -1 means "outside" (zero padding).
struct Tap {
  int i0;
  int i1;
  float w1;
};

// Source taps along one axis. Samples more than half a pixel outside [0, size) read zeros (padding); samples
// inside clamp to the edge pixel (bilinear near borders).
std::vector<Tap> axis_taps(float start, float extent, int out, int size, bool mirror) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const float step = extent / static_cast<float>(out);
  for (int o = 0; o < out; ++o) {
    const int k = mirror ? out - 1 - o : o;
    const float s = start + (static_cast<float>(k) + 0.5f) * step - 0.5f;
    if (s < -0.5f || s > static_cast<float>(size) - 0.5f) {
      taps[static_cast<size_t>(o)] = {-1, -1, 0.0f};
      continue;
    }
    const float clamped = std::clamp(s, 0.0f, static_cast<float>(size - 1));
    const int i0 = static_cast<int>(std::floor(clamped));
    const int i1 = std::min(i0 + 1, size - 1);
    taps[static_cast<size_t>(o)] = {i0, i1, clamped - static_cast<float>(i0)};
  }
  return taps;
}

}  // namespace

Image Image::view(const uint8_t* pixels, int h, int w, int c) { return Image{h, w, c, {h, w}, pixels, {}}; }

Image Image::owning(std::vector<uint8_t> pixels, int h, int w, int c) {
  return Image{h, w, c, {h, w}, nullptr, std::move(pixels)};
}

void validate_transform(const Transform& t, int channels) {
  auto size_ok = [channels](const std::vector<float>& v) {
    return v.empty() || static_cast<int>(v.size()) == channels;
  };
  if (!size_ok(t.mean) || !size_ok(t.std)) {
    throw InvalidArgument("transform.mean/std: expected " + std::to_string(channels) +
                          " values (one per channel), got " + std::to_string(t.mean.size()) + " and " +
                          std::to_string(t.std.size()));
  }
  for (float s : t.std) {
    if (!(s > 0)) throw InvalidArgument("transform.std: every value must be > 0, got " + std::to_string(s));
  }
  if (t.pad < 0) throw InvalidArgument("transform.pad: must be >= 0, got " + std::to_string(t.pad));
  if (!(t.scale_min > 0 && t.scale_min <= t.scale_max && t.scale_max <= 1)) {
    throw InvalidArgument("transform.scale: expected 0 < min <= max <= 1, got [" + std::to_string(t.scale_min) + ", " +
                          std::to_string(t.scale_max) + "]");
  }
  if (!(t.ratio_min > 0 && t.ratio_min <= t.ratio_max)) {
    throw InvalidArgument("transform.ratio: expected 0 < min <= max, got [" + std::to_string(t.ratio_min) + ", " +
                          std::to_string(t.ratio_max) + "]");
  }
  if (!(t.eval_crop_fraction > 0 && t.eval_crop_fraction <= 1)) {
    throw InvalidArgument("transform.eval_crop_fraction: expected (0, 1], got " + std::to_string(t.eval_crop_fraction));
  }
}

Region choose_region(ImageSize src, const Transform& t, Mode mode, ImageSize out, uint64_t seed) {
  if (mode == Mode::kEval) {
    if (t.train_crop == TrainCrop::kRandomResizedCrop || t.eval_crop_fraction < 1.0f || !(src == out)) {
      return centered_aspect(src, out, t.eval_crop_fraction);
    }
    return whole(src);
  }
  Uniform rng(mix_seed(seed, 1));
  switch (t.train_crop) {
    case TrainCrop::kRandomResizedCrop:
      return random_resized_crop(src, t, rng);
    case TrainCrop::kPadCrop:
      return pad_crop(src, t.pad, rng);
    case TrainCrop::kNone:
      break;
  }
  return whole(src);
}

bool choose_flip(const Transform& t, Mode mode, uint64_t seed) {
  if (mode != Mode::kTrain || t.flip != Flip::kHorizontal) return false;
  return (mix_seed(seed, 2) >> 63) != 0;
}

namespace {

// Per-channel table: normalized value of every u8 level, (v / 255 - mean) / std.
std::vector<float> normalization_table(int c, std::span<const float> mean, std::span<const float> stddev) {
  std::vector<float> table(static_cast<size_t>(c) * 256);
  for (int ch = 0; ch < c; ++ch) {
    const float m = mean.empty() ? 0.0f : mean[static_cast<size_t>(ch)];
    const float s = stddev.empty() ? 1.0f : stddev[static_cast<size_t>(ch)];
    for (int v = 0; v < 256; ++v) table[static_cast<size_t>(ch) * 256 + v] = (static_cast<float>(v) / 255.0f - m) / s;
  }
  return table;
}

// Same size, whole-pixel offset: a shifted (maybe mirrored) copy through the table, no interpolation. This is
// the common case for small images (flip, pad-and-crop) and several times faster than the bilinear path.
bool is_pixel_aligned_copy(Region r, ImageSize out) {
  return r.w == static_cast<float>(out.w) && r.h == static_cast<float>(out.h) && r.x == std::floor(r.x) &&
         r.y == std::floor(r.y);
}

void shifted_copy(const Image& img, Region region, bool flip, ImageSize out, const std::vector<float>& table,
                  float* dst) {
  const int c = img.c, x0 = static_cast<int>(region.x), y0 = static_cast<int>(region.y);
  const uint8_t* src = img.data();
  for (int oy = 0; oy < out.h; ++oy) {
    const int sy = y0 + oy;
    float* row = dst + static_cast<size_t>(oy) * out.w * c;
    for (int ox = 0; ox < out.w; ++ox) {
      const int sx = x0 + (flip ? out.w - 1 - ox : ox);
      const bool inside = sy >= 0 && sy < img.h && sx >= 0 && sx < img.w;
      const uint8_t* px = inside ? src + (static_cast<size_t>(sy) * img.w + sx) * c : nullptr;
      for (int ch = 0; ch < c; ++ch) {
        row[static_cast<size_t>(ox) * c + ch] = table[static_cast<size_t>(ch) * 256 + (px ? px[ch] : 0)];
      }
    }
  }
}

void bilinear(const Image& img, Region region, bool flip, ImageSize out, const std::vector<float>& table, float* dst) {
  const int c = img.c;
  const uint8_t* src = img.data();
  const size_t row_stride = static_cast<size_t>(img.w) * c;
  auto at = [src, row_stride, c](int y, int x, int ch) -> float {
    return src[static_cast<size_t>(y) * row_stride + static_cast<size_t>(x) * c + ch];
  };
  // The table is affine in the level: level 0 and the slope give the normalization of interpolated values.
  const auto xs = axis_taps(region.x, region.w, out.w, img.w, flip);
  const auto ys = axis_taps(region.y, region.h, out.h, img.h, false);
  for (int oy = 0; oy < out.h; ++oy) {
    const Tap ty = ys[static_cast<size_t>(oy)];
    float* row = dst + static_cast<size_t>(oy) * out.w * c;
    for (int ox = 0; ox < out.w; ++ox) {
      const Tap tx = xs[static_cast<size_t>(ox)];
      float* px = row + static_cast<size_t>(ox) * c;
      for (int ch = 0; ch < c; ++ch) {
        float v = 0.0f;
        if (ty.i0 >= 0 && tx.i0 >= 0) {
          const float top = at(ty.i0, tx.i0, ch) * (1 - tx.w1) + at(ty.i0, tx.i1, ch) * tx.w1;
          const float bottom = at(ty.i1, tx.i0, ch) * (1 - tx.w1) + at(ty.i1, tx.i1, ch) * tx.w1;
          v = top * (1 - ty.w1) + bottom * ty.w1;
        }
        const float* t = &table[static_cast<size_t>(ch) * 256];
        px[ch] = t[0] + v * (t[255] - t[0]) / 255.0f;
      }
    }
  }
}

}  // namespace

void resample_normalize(const Image& img, Region region, bool flip, ImageSize out, std::span<const float> mean,
                        std::span<const float> stddev, float* dst) {
  // Cached per thread: the same mean/std for every sample of a run.
  thread_local std::vector<float> cached_mean, cached_std, table;
  thread_local int cached_c = 0;
  if (cached_c != img.c || !std::equal(mean.begin(), mean.end(), cached_mean.begin(), cached_mean.end()) ||
      !std::equal(stddev.begin(), stddev.end(), cached_std.begin(), cached_std.end())) {
    table = normalization_table(img.c, mean, stddev);
    cached_c = img.c;
    cached_mean.assign(mean.begin(), mean.end());
    cached_std.assign(stddev.begin(), stddev.end());
  }
  if (is_pixel_aligned_copy(region, out)) {
    shifted_copy(img, region, flip, out, table, dst);
  } else {
    bilinear(img, region, flip, out, table, dst);
  }
}

void transform_sample(const Image& img, const Transform& t, Mode mode, ImageSize out, uint64_t seed, float* dst) {
  validate_transform(t, img.c);
  const Region region = choose_region({img.h, img.w}, t, mode, out, seed);
  resample_normalize(img, region, choose_flip(t, mode, seed), out, t.mean, t.std, dst);
}

}  // namespace torus::worker::data

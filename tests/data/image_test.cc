// The sample transform (worker/data/image.h): crop regions, flips, resampling and normalization, bad settings.
#include <gtest/gtest.h>

#include <cmath>

#include "common/util/error.h"
#include "worker/data/image.h"

namespace torus::worker::data {
namespace {

// A (H, W, C) image whose pixel is a function of its position, so geometry can be checked exactly.
std::vector<uint8_t> ramp(int h, int w, int c) {
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * c);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int ch = 0; ch < c; ++ch)
        px[(static_cast<size_t>(y) * w + x) * c + ch] = static_cast<uint8_t>(y * 8 + x + ch * 3);
    }
  }
  return px;
}

TEST(Transform, EvalIdentityNormalizesPerChannel) {
  const auto px = ramp(6, 5, 2);
  const Image img = Image::view(px.data(), 6, 5, 2);
  Transform t;
  t.mean = {0.5f, 0.25f};
  t.std = {0.5f, 2.0f};
  std::vector<float> out(6 * 5 * 2);
  transform_sample(img, t, Mode::kEval, {6, 5}, 123, out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t ch = i % 2;
    EXPECT_FLOAT_EQ(out[i], (px[i] / 255.0f - t.mean[ch]) / t.std[ch]) << i;
  }
}

TEST(Transform, PadCropIsAShiftWithZeroBorder) {
  const int h = 10, w = 12;
  const auto px = ramp(h, w, 1);
  const Image img = Image::view(px.data(), h, w, 1);
  Transform t;
  t.train_crop = TrainCrop::kPadCrop;
  t.pad = 3;
  int shifted = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const Region r = choose_region({h, w}, t, Mode::kTrain, {h, w}, seed);
    const int dx = static_cast<int>(r.x), dy = static_cast<int>(r.y);
    ASSERT_EQ(r.x, static_cast<float>(dx));
    ASSERT_GE(dx, -3);
    ASSERT_LE(dx, 3);
    ASSERT_GE(dy, -3);
    ASSERT_LE(dy, 3);
    shifted += (dx != 0 || dy != 0);
    std::vector<float> out(static_cast<size_t>(h) * w);
    transform_sample(img, t, Mode::kTrain, {h, w}, seed, out.data());
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const int sy = y + dy, sx = x + dx;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        const float expected = inside ? img.at(sy, sx, 0) / 255.0f : 0.0f;
        ASSERT_FLOAT_EQ(out[static_cast<size_t>(y) * w + x], expected) << "seed " << seed << " at " << y << "," << x;
      }
    }
  }
  EXPECT_GT(shifted, 40);
}

TEST(Transform, FlipMirrorsAboutHalfTheTime) {
  const auto px = ramp(4, 7, 3);
  const Image img = Image::view(px.data(), 4, 7, 3);
  Transform t;
  t.flip = Flip::kHorizontal;
  int flipped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> out(4 * 7 * 3);
    transform_sample(img, t, Mode::kTrain, {4, 7}, seed, out.data());
    const bool flip = choose_flip(t, Mode::kTrain, seed);
    flipped += flip;
    for (int x = 0; x < 7; ++x) {
      const int sx = flip ? 6 - x : x;
      ASSERT_FLOAT_EQ(out[(2 * 7 + x) * 3 + 1], img.at(2, sx, 1) / 255.0f);
    }
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
  EXPECT_FALSE(choose_flip(t, Mode::kEval, 1));
}

TEST(Transform, RandomResizedCropStaysInBoundsWithScaleAndAspect) {
  Transform t;
  t.train_crop = TrainCrop::kRandomResizedCrop;
  t.scale_min = 0.25f;
  for (ImageSize src : {ImageSize{100, 100}, ImageSize{60, 200}, ImageSize{300, 40}, ImageSize{7, 9}}) {
    for (uint64_t seed = 0; seed < 300; ++seed) {
      const Region r = choose_region(src, t, Mode::kTrain, {32, 32}, seed);
      ASSERT_GE(r.x, 0);
      ASSERT_GE(r.y, 0);
      ASSERT_GT(r.w, 0);
      ASSERT_GT(r.h, 0);
      ASSERT_LE(r.x + r.w, src.w);
      ASSERT_LE(r.y + r.h, src.h);
      const double area = static_cast<double>(r.w) * r.h / (static_cast<double>(src.w) * src.h);
      const double aspect = r.w / r.h;
      const bool fallback = r.w == src.w || r.h == src.h;
      if (!fallback && src.h >= 60) {
        EXPECT_GE(area, 0.25 * 0.9) << seed;
        EXPECT_GE(aspect, 0.75 * 0.9);
        EXPECT_LE(aspect, 4.0 / 3.0 * 1.1);
      }
    }
  }
}

TEST(Transform, ResizeKeepsConstantsAndOrder) {
  std::vector<uint8_t> flat(40 * 30 * 3, 77);
  std::vector<float> out(16 * 16 * 3);
  transform_sample(Image::view(flat.data(), 40, 30, 3), {}, Mode::kEval, {16, 16}, 0, out.data());
  for (float v : out) ASSERT_NEAR(v, 77 / 255.0f, 1e-6);
  // A horizontal ramp stays increasing after a downscale.
  std::vector<uint8_t> ramp_x(20 * 64);
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 64; ++x) ramp_x[static_cast<size_t>(y) * 64 + x] = static_cast<uint8_t>(x * 4);
  }
  std::vector<float> small(10 * 32);
  transform_sample(Image::view(ramp_x.data(), 20, 64, 1), {}, Mode::kTrain, {10, 32}, 0, small.data());
  for (int x = 1; x < 32; ++x)
    ASSERT_GT(small[static_cast<size_t>(5 * 32 + x)], small[static_cast<size_t>(5 * 32 + x - 1)]);
}

TEST(Transform, EvalCenterCropTakesTheMiddle) {
  Transform t;
  t.eval_crop_fraction = 0.5f;
  const Region r = choose_region({100, 200}, t, Mode::kEval, {50, 50}, 0);
  EXPECT_FLOAT_EQ(r.w, 50);
  EXPECT_FLOAT_EQ(r.h, 50);
  EXPECT_FLOAT_EQ(r.x, 75);
  EXPECT_FLOAT_EQ(r.y, 25);
}

TEST(Transform, BadSettingsAreNamed) {
  Transform t;
  t.mean = {0.5f, 0.5f};
  t.std = {1, 1};
  try {
    validate_transform(t, 3);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("transform.mean/std: expected 3 values"), std::string::npos) << e.what();
  }
  Transform zero_std;
  zero_std.std = {0};
  EXPECT_THROW(validate_transform(zero_std, 1), InvalidArgument);
  Transform bad_scale;
  bad_scale.scale_min = 0;
  EXPECT_THROW(validate_transform(bad_scale, 1), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::data

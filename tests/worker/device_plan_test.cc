// The device plan (worker/train/device_plan.h): what runs where for each backend offer and job, the reasons the log
// lines give, the device augmentation's spec, and that its formula means what the host loader's pad-and-crop and
// flip mean (same pixels for the same shift and flip).
#include "worker/train/device_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "worker/backend/cuda/kernel_math.h"
#include "worker/data/image.h"
#include "worker/data/synthetic.h"

namespace torus::worker::train {
namespace {

TrainConfig config_at(int image_size) {
  TrainConfig c;
  c.phases = {{.from_epoch = 0, .to_epoch = 2, .image_size = image_size, .per_rank_batch = 8}};
  c.data.transform.train_crop = data::TrainCrop::kPadCrop;
  c.data.transform.pad = 2;
  c.data.transform.flip = data::Flip::kHorizontal;
  return c;
}

std::shared_ptr<const data::Dataset> set_of(int size) {
  data::SyntheticSpec spec;
  spec.n = 4;
  spec.h = spec.w = size;
  spec.c = 3;
  return data::make_synthetic(spec);
}

constexpr TrainingOffers kAll{.staging = true, .augment = true, .capture = true};

std::string joined(const DevicePlan& plan) {
  std::string out;
  for (const std::string& line : describe(plan)) out += line + "\n";
  return out;
}

TEST(DevicePlan, HostMemoryKeepsTheHostLoop) {
  const DevicePlan p = device_plan(MemorySpace::kHost, kAll, config_at(16), *set_of(16), SyncCapture::kNoSync);
  EXPECT_EQ(p.staging, Staging::kCopy);
  EXPECT_EQ(p.augment, AugmentAt::kHost);
  EXPECT_EQ(p.step, StepRun::kEager);
  EXPECT_NE(joined(p).find("host memory"), std::string::npos) << joined(p);
}

TEST(DevicePlan, ADeviceBackendStagesAugmentsAndCaptures) {
  const DevicePlan p = device_plan(MemorySpace::kDevice, kAll, config_at(16), *set_of(16), SyncCapture::kNoSync);
  EXPECT_EQ(p.staging, Staging::kPinned);
  EXPECT_EQ(p.augment, AugmentAt::kDevice);
  EXPECT_EQ(p.step, StepRun::kCaptured);
  const std::string text = joined(p);
  EXPECT_NE(text.find("input: pinned staging"), std::string::npos) << text;
  EXPECT_NE(text.find("augmented on the device (cropPadding and flip"), std::string::npos) << text;
  EXPECT_NE(text.find("step: captured and replayed"), std::string::npos) << text;
  EXPECT_NE(text.find("learning rate is read from device memory"), std::string::npos) << text;
}

TEST(DevicePlan, EachLimitSaysWhy) {
  auto plan = [](TrainingOffers offers, const TrainConfig& c, int native, SyncCapture sync = SyncCapture::kNoSync) {
    return device_plan(MemorySpace::kDevice, offers, c, *set_of(native), sync);
  };
  const DevicePlan no_offers = plan({}, config_at(16), 16);
  EXPECT_EQ(no_offers.staging, Staging::kCopy);
  EXPECT_EQ(no_offers.augment, AugmentAt::kHost);
  EXPECT_EQ(no_offers.step, StepRun::kEager);
  EXPECT_NE(no_offers.step_why.find("does not capture"), std::string::npos);

  const DevicePlan synced = plan(kAll, config_at(16), 16, SyncCapture::kNotCapturable);
  EXPECT_EQ(synced.step, StepRun::kEager);
  EXPECT_NE(synced.step_why.find("across ranks"), std::string::npos) << synced.step_why;
  EXPECT_EQ(synced.augment, AugmentAt::kDevice) << "staging and augmentation do not depend on the sync";

  const DevicePlan captured_sync = plan(kAll, config_at(16), 16, SyncCapture::kCapturable);
  EXPECT_EQ(captured_sync.step, StepRun::kCaptured);
  EXPECT_NE(captured_sync.step_why.find("all-reduce inside, watched after each replay"), std::string::npos)
      << captured_sync.step_why;

  TrainConfig rrc = config_at(16);
  rrc.data.transform.train_crop = data::TrainCrop::kRandomResizedCrop;
  const DevicePlan resampled = plan(kAll, rrc, 16);
  EXPECT_EQ(resampled.augment, AugmentAt::kHost);
  EXPECT_NE(resampled.augment_why.find("randomResizedCrop"), std::string::npos) << resampled.augment_why;
  EXPECT_EQ(resampled.staging, Staging::kPinned);

  const DevicePlan resized = plan(kAll, config_at(12), 16);
  EXPECT_EQ(resized.augment, AugmentAt::kHost);
  EXPECT_NE(resized.augment_why.find("12 px"), std::string::npos) << resized.augment_why;

  const DevicePlan no_augment = plan({.staging = true, .capture = true}, config_at(16), 16);
  EXPECT_EQ(no_augment.augment, AugmentAt::kHost);
  EXPECT_EQ(no_augment.step, StepRun::kCaptured);
}

TEST(DevicePlan, AugmentSpecFollowsTheTransform) {
  data::Transform t;
  t.train_crop = data::TrainCrop::kPadCrop;
  t.pad = 4;
  t.flip = data::Flip::kHorizontal;
  t.mean = {0.5f, 0.25f, 0.125f};
  t.std = {0.25f, 0.5f, 2.0f};
  const AugmentSpec a = augment_spec(t, 7, 0, 0);
  EXPECT_EQ(a.max_shift, 4);
  EXPECT_TRUE(a.flip);
  EXPECT_EQ(a.mean[1], 0.25f);
  EXPECT_EQ(a.inv_std[0], 4.0f);
  EXPECT_EQ(a.inv_std[2], 0.5f);
  EXPECT_NE(augment_spec(t, 7, 1, 0).seed, a.seed) << "every epoch draws anew";
  EXPECT_NE(augment_spec(t, 7, 0, 1).seed, a.seed) << "ranks draw apart";
  t.train_crop = data::TrainCrop::kNone;
  t.flip = data::Flip::kOff;
  const AugmentSpec plain = augment_spec(t, 7, 0, 0);
  EXPECT_EQ(plain.max_shift, 0);
  EXPECT_FALSE(plain.flip);
}

// The device's formula against the host loader's pad-and-crop + flip (data/image.h) for every shift and flip: the
// same pixels, padding included (pixel 0), normalized alike (up to multiplying by 1/std instead of dividing).
TEST(DevicePlan, DeviceAugmentationMeansWhatTheHostLoadersDoes) {
  const int h = 6, w = 5, c = 3, pad = 2;
  std::mt19937 rng(5);
  std::vector<uint8_t> pixels(static_cast<size_t>(h * w * c));
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() % 256);
  const data::Image img = data::Image::view(pixels.data(), h, w, c);
  const std::vector<float> mean = {0.4f, 0.5f, 0.6f}, stddev = {0.2f, 0.25f, 0.3f};
  AugmentSpec spec;
  for (int ch = 0; ch < c; ++ch) {
    spec.mean[ch] = mean[static_cast<size_t>(ch)];
    spec.inv_std[ch] = 1.0f / stddev[static_cast<size_t>(ch)];
  }
  std::vector<float> host(pixels.size());
  for (int dy = -pad; dy <= pad; ++dy)
    for (int dx = -pad; dx <= pad; ++dx)
      for (int flip = 0; flip < 2; ++flip) {
        const data::Region region{static_cast<float>(dx), static_cast<float>(dy), static_cast<float>(w),
                                  static_cast<float>(h)};
        data::resample_normalize(img, region, flip != 0, {h, w}, mean, stddev, host.data());
        const cuda::kmath::SampleAugment a{dy, dx, flip};
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x)
            for (int ch = 0; ch < c; ++ch) {
              const float want = host[static_cast<size_t>((y * w + x) * c + ch)];
              EXPECT_NEAR(cuda::kmath::augmented_value(pixels.data(), y, x, ch, h, w, c, a, spec), want,
                          1e-5f * std::max(1.0f, std::abs(want)))
                  << "shift " << dy << "," << dx << " flip " << flip << " at " << y << "," << x << "," << ch;
            }
      }
}

}  // namespace
}  // namespace torus::worker::train

// DeviceInput (worker/train/device_input.h) on the CPU through pretend_device_backend.h: a staged batch reaches the
// same fixed buffers every step (what a captured step reads), fp32 pixels are copied as they are, raw pixels go
// through the device augmentation with the given spec and first sample, every slot is released after its take, and
// a batch without the pixels the plan needs is refused.
#include "worker/train/device_input.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "tests/worker/pretend_device_backend.h"

namespace torus::worker::train {
namespace {

using torus::worker::testing::PretendDeviceBackend;

constexpr TrainingOffers kAll{.staging = true, .augment = true, .capture = true};
constexpr int kN = 2, kH = 3, kW = 4, kC = 3;
constexpr size_t kPixels = size_t{kN} * kH * kW * kC;

std::vector<float> host(PretendDeviceBackend& b, Tensor t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  b.download(t, out.data());
  return out;
}

TEST(DeviceInput, Fp32BatchesLandInTheSameFixedBuffersEveryStep) {
  PretendDeviceBackend backend(kAll);
  DeviceInput input(backend, AugmentAt::kHost, DType::kF32, static_cast<int64_t>(kPixels), kN);
  std::vector<float> images(kPixels);
  std::vector<int32_t> labels = {3, 1};
  void* first_images = nullptr;
  for (int step = 0; step < 3; ++step) {
    std::iota(images.begin(), images.end(), static_cast<float>(100 * step));
    labels[0] = step;
    const data::Batch batch{.n = kN, .h = kH, .w = kW, .c = kC, .images = images.data(), .labels = labels.data()};
    const DeviceInput::Input in = input.take(input.stage(batch), AugmentSpec{}, 0);
    if (step == 0) first_images = in.images.data();
    EXPECT_EQ(in.images.data(), first_images) << "a captured step reads fixed addresses";
    EXPECT_EQ(in.images.shape(), (Shape{kN, kH, kW, kC}));
    EXPECT_EQ(host(backend, in.images), images) << "step " << step;
    EXPECT_EQ(in.labels.i32()[0], step);
    EXPECT_EQ(in.labels.i32()[1], 1);
  }
  const std::vector<std::string> want = {"stage 0", "acquire 0", "release 0", "download",
                                         "stage 1", "acquire 1", "release 1", "download",
                                         "stage 0", "acquire 0", "release 0", "download"};
  EXPECT_EQ(backend.log, want) << "each slot is acquired and released by its take, alternating";
}

TEST(DeviceInput, RawBatchesAreAugmentedOnTheDeviceWithTheSpec) {
  PretendDeviceBackend backend(kAll);
  DeviceInput input(backend, AugmentAt::kDevice, DType::kF32, static_cast<int64_t>(kPixels), kN);
  std::vector<uint8_t> raw(kPixels);
  std::iota(raw.begin(), raw.end(), uint8_t{0});
  std::vector<int32_t> labels = {0, 1};
  const data::Batch batch{.n = kN, .h = kH, .w = kW, .c = kC, .raw = raw.data(), .labels = labels.data()};
  AugmentSpec spec;
  spec.max_shift = 1;
  spec.flip = true;
  spec.seed = 42;
  const DeviceInput::Input in = input.take(input.stage(batch), spec, 64);
  ASSERT_EQ(backend.augment_inputs.size(), 1u);
  EXPECT_EQ(backend.augment_inputs[0], raw) << "the u8 pixels reach the device unchanged";
  EXPECT_EQ(backend.augment_first_samples[0], 64u);
  EXPECT_EQ(backend.augment_specs[0].seed, 42u);
  const auto a = cuda::kmath::sample_augment(42, 65, 1, true);  // sample 1 of the batch
  const size_t image = size_t{kH} * kW * kC;
  EXPECT_EQ(host(backend, in.images)[image + 5],
            cuda::kmath::augmented_value(raw.data() + image, 0, 1, 2, kH, kW, kC, a, spec));
}

TEST(DeviceInput, ABatchWithoutThePixelsThePlanNeedsIsRefused) {
  PretendDeviceBackend backend(kAll);
  DeviceInput input(backend, AugmentAt::kDevice, DType::kF32, static_cast<int64_t>(kPixels), kN);
  std::vector<float> images(kPixels);
  std::vector<int32_t> labels = {0, 1};
  const data::Batch batch{.n = kN, .h = kH, .w = kW, .c = kC, .images = images.data(), .labels = labels.data()};
  EXPECT_THROW(input.stage(batch), InvalidArgument);
  PretendDeviceBackend no_staging;  // offers nothing
  EXPECT_THROW(DeviceInput(no_staging, AugmentAt::kHost, DType::kF32, 8, 1), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::train

#pragma once
// One decoded image and the per-sample transforms that turn it into a normalized float tensor.
//
//   Image img = dataset.decode(i, hint);                  // u8 (H, W, C), owning or a view into memory
//   transform_sample(img, transform, Mode::kTrain, out_h, out_w, seed, out);  // out: float (out_h, out_w, C)
//
// Geometry: a source region is chosen (random-resized-crop, pad-and-crop, centered aspect crop, or the whole
// image), optionally mirrored, and resampled bilinearly (pixel centres, like align_corners=False) to the output
// size; then each channel is normalized: (pixel / 255 - mean[c]) / std[c]. Same seed, same output.
#include <cstdint>
#include <span>
#include <vector>

#include "worker/mode.h"

namespace torus::worker::data {

struct ImageSize {
  int h = 0;
  int w = 0;
  bool operator==(const ImageSize&) const = default;
};

// u8 pixels (H, W, C): either borrowed (a view into a data set's memory) or owned (a decoded file).
struct Image {
  int h = 0;
  int w = 0;
  int c = 0;
  ImageSize native;  // size before any decode-time downscaling; equals {h, w} when there was none
  const uint8_t* borrowed = nullptr;
  std::vector<uint8_t> storage;

  static Image view(const uint8_t* pixels, int h, int w, int c);
  static Image owning(std::vector<uint8_t> pixels, int h, int w, int c);
  const uint8_t* data() const { return borrowed ? borrowed : storage.data(); }
  uint8_t at(int y, int x, int ch) const { return data()[(static_cast<size_t>(y) * w + x) * c + ch]; }
};

// Training-time geometry.
enum class TrainCrop {
  kNone,               // whole image, resized to the output size
  kPadCrop,            // zero-pad by `pad` pixels, take a random window of the source size (small images)
  kRandomResizedCrop,  // random area fraction in [scale_min, scale_max], aspect in [ratio_min, ratio_max]
};
enum class Flip { kOff, kHorizontal };

struct Transform {
  TrainCrop train_crop = TrainCrop::kNone;
  int pad = 4;
  float scale_min = 0.08f;
  float scale_max = 1.0f;
  float ratio_min = 3.0f / 4.0f;
  float ratio_max = 4.0f / 3.0f;
  Flip flip = Flip::kOff;
  // Evaluation: the centered region of the output's aspect ratio covers this fraction of the image's shorter
  // fitting side (0.875 = torchvision's Resize(256) + CenterCrop(224); 1.0 = the largest centered region).
  float eval_crop_fraction = 1.0f;
  // Per channel, in [0, 1] pixel units; empty means mean 0, std 1.
  std::vector<float> mean;
  std::vector<float> std;
};

// A rectangle in source pixel coordinates (may extend past the image for padding).
struct Region {
  float x = 0;
  float y = 0;
  float w = 0;
  float h = 0;
};

// The region a sample reads, before flipping; pure given (src, transform, mode, out size, seed).
Region choose_region(ImageSize src, const Transform& t, Mode mode, ImageSize out, uint64_t seed);

// Whether the sample is mirrored; pure given (transform, mode, seed).
bool choose_flip(const Transform& t, Mode mode, uint64_t seed);

// Fills out (out.h, out.w, img.c) from img. Throws InvalidArgument on a mean/std size that does not match C.
void transform_sample(const Image& img, const Transform& t, Mode mode, ImageSize out, uint64_t seed, float* dst);

// Same, with the region already chosen (in img's pixel coordinates) and flip decided.
void resample_normalize(const Image& img, Region region, bool flip, ImageSize out, std::span<const float> mean,
                        std::span<const float> stddev, float* dst);

// Checks a Transform against a channel count; throws InvalidArgument naming the field.
void validate_transform(const Transform& t, int channels);

}  // namespace torus::worker::data

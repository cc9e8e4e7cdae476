#pragma once
// A data set: indexed samples with a label, a native size and u8 pixels (H, W, C). The loader calls these from
// several threads at once, so every method is const and thread-safe.
//
//   auto train = load_fashion_mnist("/usr/share/datasets/fashion-mnist", Split::kTrain);   // idx.h
//   auto val = JpegFolder::open("/data/imagenet", Split::kVal);                            // jpeg_folder.h
//   Image img = train->decode(i, no_downscale);  label = train->label(i);
//
// In-memory sets (Fashion-MNIST, CIFAR-10, synthetic) are an ArrayDataset: all pixels in one (N, H, W, C) buffer.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "worker/data/image.h"

namespace torus::worker::data {

enum class Split { kTrain, kVal };

// Given a native size, how many times smaller than native a decoder may return the image (>= 1).
using DownscalePolicy = std::function<double(ImageSize native)>;

inline const DownscalePolicy no_downscale = [](ImageSize) { return 1.0; };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int channels() const = 0;
  virtual int num_classes() const = 0;
  virtual int32_t label(int64_t index) const = 0;
  // Size before any transform (rectangular validation plans batches by it; JPEG folders read file headers).
  virtual ImageSize native_size(int64_t index) const = 0;
  // The pixels of sample `index`. A decoder that can shrink while decoding (JPEG DCT scaling) calls
  // `max_downscale(native size)` and may return an image up to that many times smaller; callers map regions
  // chosen in native coordinates by the returned size. In-memory sets ignore it and return a view.
  virtual Image decode(int64_t index, const DownscalePolicy& max_downscale) const = 0;
  // Names the source in error messages and logs.
  virtual std::string describe() const = 0;
};

// N images of one size, u8 (N, H, W, C), with int32 labels in [0, classes).
class ArrayDataset final : public Dataset {
 public:
  ArrayDataset(std::string name, int n, int h, int w, int c, int classes, std::vector<uint8_t> pixels,
               std::vector<int32_t> labels);
  int64_t size() const override { return n_; }
  int channels() const override { return c_; }
  int num_classes() const override { return classes_; }
  int32_t label(int64_t index) const override { return labels_[static_cast<size_t>(index)]; }
  ImageSize native_size(int64_t) const override { return {h_, w_}; }
  Image decode(int64_t index, const DownscalePolicy& max_downscale) const override;
  std::string describe() const override { return name_; }

  const std::vector<uint8_t>& pixels() const { return pixels_; }  // (N, H, W, C)
  const std::vector<int32_t>& labels() const { return labels_; }  // (N)
  // Per-channel mean and std of pixel / 255 over the whole set (for Transform::mean/std).
  void channel_stats(std::vector<float>& mean, std::vector<float>& stddev) const;

 private:
  std::string name_;
  int n_, h_, w_, c_, classes_;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};

// The whole file's bytes; InvalidArgument when it cannot be opened, SystemError when reading fails.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace torus::worker::data

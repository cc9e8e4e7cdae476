#pragma once
// An ImageNet-style folder of JPEGs: root/{train,val}/<class>/*.jpg, classes sorted by folder name, files sorted
// within a class. Decoded with libjpeg-turbo (TurboJPEG API) to RGB, shrinking by DCT scaling (1/2, 1/4, 1/8)
// while decoding when the crop allows it, which is most of the decode time saved for small training sizes.
//
//   auto train = JpegFolder::open("/data/imagenet", Split::kTrain);
//   train->classes();  // {"n01440764", ...}
//
// Native sizes (for rectangular validation) are read from file headers on first use and cached.
// A file that cannot be decoded throws CorruptData naming it.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace torus::worker::data {

class JpegFolder final : public Dataset {
 public:
  // Throws InvalidArgument if root/<split> is missing or holds no class folder with JPEGs.
  static std::shared_ptr<JpegFolder> open(const std::string& root, Split split);

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int channels() const override { return 3; }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  int32_t label(int64_t index) const override { return labels_[static_cast<size_t>(index)]; }
  ImageSize native_size(int64_t index) const override;
  Image decode(int64_t index, const DownscalePolicy& max_downscale) const override;
  std::string describe() const override { return "jpeg folder " + dir_; }

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const { return files_[static_cast<size_t>(index)]; }

 private:
  JpegFolder(std::string dir, std::vector<std::string> classes, std::vector<std::string> files,
             std::vector<int32_t> labels);
  void read_all_sizes() const;

  std::string dir_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int32_t> labels_;
  mutable std::once_flag sizes_once_;
  mutable std::vector<ImageSize> sizes_;
};

// Decodes a JPEG held in memory to RGB (H, W, 3), at most `max_downscale` times smaller than native.
// `name` is used in error messages. Throws CorruptData.
Image decode_jpeg(const std::vector<uint8_t>& bytes, double max_downscale, const std::string& name);
// The size in the JPEG header. Throws CorruptData.
ImageSize jpeg_size(const std::vector<uint8_t>& bytes, const std::string& name);
// Encodes RGB (H, W, 3) pixels (tests and tools). Throws SystemError if TurboJPEG fails.
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int h, int w, int quality);

}  // namespace torus::worker::data

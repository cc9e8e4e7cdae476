#include "worker/data/dataset.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/util/error.h"

namespace torus::worker::data {

ArrayDataset::ArrayDataset(std::string name, int n, int h, int w, int c, int classes, std::vector<uint8_t> pixels,
                           std::vector<int32_t> labels)
    : name_(std::move(name)),
      n_(n),
      h_(h),
      w_(w),
      c_(c),
      classes_(classes),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)) {
  const size_t expected = static_cast<size_t>(n) * h * w * c;
  if (n < 0 || h < 1 || w < 1 || c < 1 || pixels_.size() != expected) {
    throw InvalidArgument(name_ + ": expected " + std::to_string(n) + "x" + std::to_string(h) + "x" +
                          std::to_string(w) + "x" + std::to_string(c) + " pixels, got " +
                          std::to_string(pixels_.size()) + " bytes");
  }
  if (labels_.size() != static_cast<size_t>(n)) {
    throw InvalidArgument(name_ + ": expected " + std::to_string(n) + " labels, got " + std::to_string(labels_.size()));
  }
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] < 0 || labels_[i] >= classes) {
      throw CorruptData(name_ + ": label of sample " + std::to_string(i) + " is " + std::to_string(labels_[i]) +
                        ", expected [0, " + std::to_string(classes) + ")");
    }
  }
}

Image ArrayDataset::decode(int64_t index, const DownscalePolicy& /*max_downscale*/) const {
  const size_t stride = static_cast<size_t>(h_) * w_ * c_;
  return Image::view(pixels_.data() + static_cast<size_t>(index) * stride, h_, w_, c_);
}

void ArrayDataset::channel_stats(std::vector<float>& mean, std::vector<float>& stddev) const {
  std::vector<double> sum(static_cast<size_t>(c_)), sum_sq(static_cast<size_t>(c_));
  for (size_t i = 0; i < pixels_.size(); ++i) {
    const double v = pixels_[i] / 255.0;
    sum[i % static_cast<size_t>(c_)] += v;
    sum_sq[i % static_cast<size_t>(c_)] += v * v;
  }
  const double count = static_cast<double>(pixels_.size() / static_cast<size_t>(c_));
  mean.assign(static_cast<size_t>(c_), 0.0f);
  stddev.assign(static_cast<size_t>(c_), 1.0f);
  for (size_t ch = 0; ch < static_cast<size_t>(c_); ++ch) {
    if (count == 0) continue;
    const double m = sum[ch] / count;
    mean[ch] = static_cast<float>(m);
    stddev[ch] = static_cast<float>(std::sqrt(std::max(sum_sq[ch] / count - m * m, 1e-12)));
  }
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw SystemError(path + ": read failed: " + std::strerror(errno));
  return bytes;
}

}  // namespace torus::worker::data

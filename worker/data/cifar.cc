#include "worker/data/cifar.h"

#include "common/util/error.h"

namespace torus::worker::data {

void read_cifar_batch(const std::string& path, std::vector<uint8_t>& pixels, std::vector<int32_t>& labels) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  if (bytes.empty())
    throw CorruptData(path + ": empty file, expected " + std::to_string(kCifarRecordBytes) + "-byte records");
  if (bytes.size() % kCifarRecordBytes != 0) {
    throw CorruptData(path + ": truncated: " + std::to_string(bytes.size()) + " bytes is not a whole number of " +
                      std::to_string(kCifarRecordBytes) + "-byte records (last record has " +
                      std::to_string(bytes.size() % kCifarRecordBytes) + " bytes)");
  }
  constexpr int kPlane = kCifarSide * kCifarSide;
  const size_t records = bytes.size() / kCifarRecordBytes;
  const size_t first_pixel = pixels.size();
  pixels.resize(first_pixel + records * 3 * kPlane);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * kCifarRecordBytes;
    if (rec[0] >= 10) {
      throw CorruptData(path + ": record " + std::to_string(r) + " has label " + std::to_string(rec[0]) +
                        ", expected [0, 10)");
    }
    labels.push_back(rec[0]);
    // (C, H, W) on disk -> (H, W, C) in memory
    uint8_t* dst = pixels.data() + first_pixel + r * 3 * kPlane;
    for (int p = 0; p < kPlane; ++p) {
      for (int ch = 0; ch < 3; ++ch) dst[p * 3 + ch] = rec[1 + ch * kPlane + p];
    }
  }
}

std::shared_ptr<ArrayDataset> load_cifar10(const std::string& dir, Split split) {
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;
  if (split == Split::kTrain) {
    for (int b = 1; b <= 5; ++b) read_cifar_batch(dir + "/data_batch_" + std::to_string(b) + ".bin", pixels, labels);
  } else {
    read_cifar_batch(dir + "/test_batch.bin", pixels, labels);
  }
  const int n = static_cast<int>(labels.size());
  return std::make_shared<ArrayDataset>("cifar-10 " + dir, n, kCifarSide, kCifarSide, 3, 10, std::move(pixels),
                                        std::move(labels));
}

}  // namespace torus::worker::data

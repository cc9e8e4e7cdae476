#pragma once
// Fashion-MNIST (and MNIST) in IDX format, gzip-compressed or plain (zlib reads both).
//
//   auto train = load_fashion_mnist("/usr/share/datasets/fashion-mnist", Split::kTrain);  // 60000 x 28x28x1
//
// IDX: big-endian int32 magic (0x00000803 images, 0x00000801 labels), counts, then u8 data. Any mismatch (magic,
// counts, truncation, trailing bytes, label out of range) throws CorruptData naming the file and what was wrong.
#include <memory>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace torus::worker::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct IdxImages {
  int n = 0;
  int h = 0;
  int w = 0;
  std::vector<uint8_t> pixels;  // (N, H, W)
};

// Whole decompressed contents of a gzip (or plain) file. Throws InvalidArgument if it cannot be opened and
// CorruptData if the compressed stream is damaged or cut short.
std::vector<uint8_t> read_gzip_file(const std::string& path);

IdxImages read_idx_images(const std::string& path);
std::vector<int32_t> read_idx_labels(const std::string& path, int num_classes);

// `dir`/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz; 10 classes, 1 channel.
std::shared_ptr<ArrayDataset> load_fashion_mnist(const std::string& dir, Split split);

}  // namespace torus::worker::data

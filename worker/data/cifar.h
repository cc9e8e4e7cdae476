#pragma once
// CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes (3 x 32 x 32, channel-major).
//
//   auto train = load_cifar10("/data/cifar-10-batches-bin", Split::kTrain);  // data_batch_1..5.bin, 50000 x 32x32x3
//   auto val = load_cifar10(dir, Split::kVal);                               // test_batch.bin
//
// A file that is not a whole number of records, or a label outside [0, 10), throws CorruptData naming the file.
#include <memory>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace torus::worker::data {

inline constexpr int kCifarSide = 32;
inline constexpr int kCifarRecordBytes = 1 + 3 * kCifarSide * kCifarSide;

// Appends the file's records: pixels as (N, 32, 32, 3), labels as (N).
void read_cifar_batch(const std::string& path, std::vector<uint8_t>& pixels, std::vector<int32_t>& labels);

std::shared_ptr<ArrayDataset> load_cifar10(const std::string& dir, Split split);

}  // namespace torus::worker::data

#include "worker/data/cifar.h"

#include <gtest/gtest.h>

#include "common/util/error.h"
#include "tests/data/test_files.h"

namespace torus::worker::data {
namespace {

using testing::TempDir;

// A record whose pixel (channel ch, y, x) is (label * 50 + ch * 7 + y + x) % 256, so the layout can be checked.
std::vector<uint8_t> make_records(int count, int first_label) {
  std::vector<uint8_t> bytes;
  for (int r = 0; r < count; ++r) {
    const int label = (first_label + r) % 10;
    bytes.push_back(static_cast<uint8_t>(label));
    for (int ch = 0; ch < 3; ++ch) {
      for (int y = 0; y < 32; ++y) {
        for (int x = 0; x < 32; ++x) bytes.push_back(static_cast<uint8_t>((label * 50 + ch * 7 + y + x) % 256));
      }
    }
  }
  return bytes;
}

TEST(Cifar, ReadsBatchesAsHwc) {
  TempDir dir;
  for (int b = 1; b <= 5; ++b)
    testing::write_bytes(dir.file("data_batch_" + std::to_string(b) + ".bin"), make_records(3, b));
  testing::write_bytes(dir.file("test_batch.bin"), make_records(4, 0));
  auto train = load_cifar10(dir.path().string(), Split::kTrain);
  ASSERT_EQ(train->size(), 15);
  EXPECT_EQ(train->native_size(0), (ImageSize{32, 32}));
  EXPECT_EQ(train->channels(), 3);
  EXPECT_EQ(train->label(0), 1);
  EXPECT_EQ(train->label(14), (5 + 2) % 10);
  const Image img = train->decode(4, no_downscale);  // batch 2, record 1: label 3
  ASSERT_EQ(train->label(4), 3);
  for (int ch = 0; ch < 3; ++ch) {
    EXPECT_EQ(img.at(5, 9, ch), (3 * 50 + ch * 7 + 5 + 9) % 256);
  }
  auto val = load_cifar10(dir.path().string(), Split::kVal);
  EXPECT_EQ(val->size(), 4);
}

TEST(Cifar, TruncatedFileIsNamed) {
  TempDir dir;
  auto bytes = make_records(2, 0);
  bytes.resize(bytes.size() - 5);
  const std::string path = dir.file("test_batch.bin");
  testing::write_bytes(path, bytes);
  try {
    load_cifar10(dir.path().string(), Split::kVal);
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last record has 3068 bytes"), std::string::npos) << e.what();
  }
}

TEST(Cifar, BadLabelIsNamed) {
  TempDir dir;
  auto bytes = make_records(3, 0);
  bytes[2 * kCifarRecordBytes] = 12;
  const std::string path = dir.file("test_batch.bin");
  testing::write_bytes(path, bytes);
  try {
    load_cifar10(dir.path().string(), Split::kVal);
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("record 2 has label 12"), std::string::npos) << e.what();
  }
}

TEST(Cifar, MissingBatchIsInvalidArgument) {
  TempDir dir;
  EXPECT_THROW(load_cifar10(dir.path().string(), Split::kTrain), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::data

#include "worker/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <numeric>

#include "common/util/error.h"
#include "tests/data/test_files.h"

namespace torus::worker::data {
namespace {

using testing::TempDir;

std::string fashion(const std::string& name) { return std::string(kFashionMnistDir) + "/" + name; }

bool have_fashion_mnist() { return std::filesystem::exists(fashion("t10k-images-idx3-ubyte.gz")); }

// Runs `f`, expects CorruptData whose message names `file` and contains `what`.
template <typename F>
void expect_corrupt(F f, const std::string& file, const std::string& what) {
  try {
    f();
    FAIL() << "expected CorruptData for " << file;
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// Reference figures computed independently with Python's gzip module over Debian's files.
TEST(FashionMnist, TestSplitMatchesReference) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto ds = load_fashion_mnist(kFashionMnistDir, Split::kVal);
  ASSERT_EQ(ds->size(), 10000);
  EXPECT_EQ(ds->native_size(0), (ImageSize{28, 28}));
  EXPECT_EQ(ds->channels(), 1);
  EXPECT_EQ(ds->label(0), 9);
  EXPECT_EQ(ds->label(1), 2);
  EXPECT_EQ(ds->label(9999), 5);
  const auto& px = ds->pixels();
  EXPECT_EQ(std::accumulate(px.begin(), px.end(), uint64_t{0}), 573469082u);
  EXPECT_EQ(crc32(0, px.data(), static_cast<uInt>(px.size())), 309494841u);
  std::vector<int> per_class(10);
  for (int64_t i = 0; i < ds->size(); ++i) ++per_class[static_cast<size_t>(ds->label(i))];
  for (int count : per_class) EXPECT_EQ(count, 1000);
}

TEST(FashionMnist, TrainSplitMatchesReference) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto ds = load_fashion_mnist(kFashionMnistDir, Split::kTrain);
  ASSERT_EQ(ds->size(), 60000);
  EXPECT_EQ(ds->label(0), 9);
  EXPECT_EQ(ds->label(1), 0);
  const auto& px = ds->pixels();
  EXPECT_EQ(std::accumulate(px.begin(), px.end(), uint64_t{0}), 3431114169u);
}

class IdxCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
    images_ = read_gzip_file(fashion("t10k-images-idx3-ubyte.gz"));
    labels_ = read_gzip_file(fashion("t10k-labels-idx1-ubyte.gz"));
  }
  TempDir dir_;
  std::vector<uint8_t> images_, labels_;
};

TEST_F(IdxCorruption, TruncatedImagesNameFileAndCounts) {
  auto cut = images_;
  cut.resize(cut.size() - 100);
  const std::string path = dir_.file("cut-images.gz");
  testing::write_gzip(path, cut);
  expect_corrupt([&] { read_idx_images(path); }, path, "truncated: header says 10000 images of 28x28");
}

TEST_F(IdxCorruption, CutGzipStreamIsReported) {
  const std::string path = dir_.file("cut-stream.gz");
  testing::write_gzip(path, images_);
  auto compressed = testing::read_bytes(path);
  compressed.resize(compressed.size() / 2);
  testing::write_bytes(path, compressed);
  expect_corrupt([&] { read_idx_images(path); }, path, "gzip");
}

TEST_F(IdxCorruption, BadMagicIsReported) {
  auto bad = images_;
  bad[3] = 0x01;  // the labels magic in an images file
  const std::string path = dir_.file("magic.gz");
  testing::write_gzip(path, bad);
  expect_corrupt([&] { read_idx_images(path); }, path, "bad magic number 0x00000801, expected 0x00000803");
}

TEST_F(IdxCorruption, TrailingBytesAndBadLabels) {
  auto longer = labels_;
  longer.push_back(1);
  const std::string trailing = dir_.file("trailing.gz");
  testing::write_gzip(trailing, longer);
  expect_corrupt([&] { read_idx_labels(trailing, 10); }, trailing, "1 unexpected trailing bytes");

  auto bad_label = labels_;
  bad_label[8 + 17] = 10;
  const std::string label_path = dir_.file("label.gz");
  testing::write_gzip(label_path, bad_label);
  expect_corrupt([&] { read_idx_labels(label_path, 10); }, label_path, "label 17 is 10");
}

TEST_F(IdxCorruption, LabelCountMismatchNamesBothFiles) {
  testing::write_gzip(dir_.file("t10k-images-idx3-ubyte.gz"), images_);
  auto fewer = labels_;
  fewer.resize(8 + 9999);
  fewer[7] = static_cast<uint8_t>(9999 & 0xFF);
  fewer[6] = static_cast<uint8_t>(9999 >> 8);
  testing::write_gzip(dir_.file("t10k-labels-idx1-ubyte.gz"), fewer);
  expect_corrupt([&] { load_fashion_mnist(dir_.path().string(), Split::kVal); }, "t10k-labels-idx1-ubyte.gz",
                 "has 9999 labels but");
}

TEST(Idx, MissingFileIsInvalidArgument) {
  EXPECT_THROW(read_idx_images("/nonexistent/torus/images.gz"), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::data

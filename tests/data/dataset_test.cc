// The in-memory data set (ArrayDataset): what it refuses, samples as views of its one buffer, per-channel statistics;
// and read_file_bytes, which the file-backed sets read with.
#include "worker/data/dataset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/util/error.h"
#include "tests/data/test_files.h"

namespace torus::worker::data {
namespace {

// Two 1x2 images of 2 channels; channel 0 holds 0 and 255, channel 1 is 51 everywhere.
ArrayDataset two_images() { return ArrayDataset("tiny", 2, 1, 2, 2, 3, {0, 51, 255, 51, 255, 51, 0, 51}, {2, 0}); }

TEST(ArrayDataset, SamplesAreViewsOfTheOneBuffer) {
  const ArrayDataset ds = two_images();
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.channels(), 2);
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.label(0), 2);
  EXPECT_EQ(ds.native_size(1).h, 1);
  EXPECT_EQ(ds.native_size(1).w, 2);
  const Image second = ds.decode(1, no_downscale);
  EXPECT_EQ(second.data(), ds.pixels().data() + 4) << "a view, not a copy";
  EXPECT_EQ(second.at(0, 0, 0), 255);
  EXPECT_EQ(second.at(0, 1, 0), 0);
  EXPECT_EQ(ds.describe(), "tiny");
}

TEST(ArrayDataset, ChannelStatsArePerChannelOverTheWholeSet) {
  std::vector<float> mean, stddev;
  two_images().channel_stats(mean, stddev);
  ASSERT_EQ(mean.size(), 2u);
  EXPECT_FLOAT_EQ(mean[0], 0.5f);  // half the values 0, half 1
  EXPECT_FLOAT_EQ(stddev[0], 0.5f);
  EXPECT_FLOAT_EQ(mean[1], 0.2f);  // 51 / 255
  EXPECT_GT(stddev[1], 0.0f) << "a constant channel gets a floor, never 0 (it divides)";
  EXPECT_LT(stddev[1], 1e-5f);
}

TEST(ArrayDataset, RefusesPixelsOrLabelsThatDoNotFitTheShape) {
  EXPECT_THROW(ArrayDataset("short", 2, 1, 2, 2, 3, std::vector<uint8_t>(7), {0, 0}), InvalidArgument);
  EXPECT_THROW(ArrayDataset("labels", 2, 1, 2, 2, 3, std::vector<uint8_t>(8), {0}), InvalidArgument);
  try {
    ArrayDataset("bad-label", 2, 1, 2, 2, 3, std::vector<uint8_t>(8), {0, 3});
    FAIL() << "expected CorruptData";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("bad-label: label of sample 1 is 3, expected [0, 3)"), std::string::npos)
        << e.what();
  }
}

TEST(ReadFileBytes, ReturnsEveryByteOfTheFile) {
  testing::TempDir dir;
  const std::string path = dir.file("bytes.bin");
  const std::vector<uint8_t> bytes = {0, 255, 10, 13, 26, 0, 7};  // NUL, newline and EOF-like bytes among them
  testing::write_bytes(path, bytes);
  EXPECT_EQ(read_file_bytes(path), bytes);
  testing::write_bytes(path, {});
  EXPECT_TRUE(read_file_bytes(path).empty());
}

TEST(ReadFileBytes, NamesTheFileItCannotOpen) {
  testing::TempDir dir;
  const std::string missing = dir.file("missing.bin");
  try {
    read_file_bytes(missing);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(missing + ": cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torus::worker::data

#include "worker/data/jpeg_folder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "common/util/error.h"
#include "tests/data/test_files.h"
#include "worker/data/loader.h"

namespace torus::worker::data {
namespace {

using testing::TempDir;

// Solid-colour RGB JPEG; the colour encodes the class so decoding can be checked.
void write_jpeg(const std::string& path, int h, int w, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = r;
    rgb[i + 1] = g;
    rgb[i + 2] = b;
  }
  testing::write_bytes(path, encode_jpeg(rgb.data(), h, w, 95));
}

struct Made {
  int h, w;
};

// root/val/{ant,bee,cat}/ with images of several aspect ratios (classes created out of order on purpose).
const std::map<std::string, std::vector<Made>> kFiles = {
    {"cat", {{40, 60}, {64, 32}, {48, 48}}},
    {"ant", {{30, 90}, {80, 40}}},
    {"bee", {{50, 50}, {36, 72}, {90, 45}, {40, 56}}},
};
const std::map<std::string, std::array<uint8_t, 3>> kColours = {
    {"ant", {200, 30, 30}}, {"bee", {30, 200, 30}}, {"cat", {30, 30, 200}}};

void make_folder(const TempDir& dir, const std::string& split) {
  for (const auto& [cls, sizes] : kFiles) {
    std::filesystem::create_directories(dir.path() / split / cls);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto& c = kColours.at(cls);
      write_jpeg((dir.path() / split / cls / ("img" + std::to_string(i) + ".JPEG")).string(), sizes[i].h, sizes[i].w,
                 c[0], c[1], c[2]);
    }
  }
  testing::write_bytes((dir.path() / split / "cat" / "README.txt").string(), {'x'});
}

TEST(JpegFolder, ClassesSortedLabelsAndSizes) {
  TempDir dir;
  make_folder(dir, "val");
  auto ds = JpegFolder::open(dir.path().string(), Split::kVal);
  EXPECT_EQ(ds->classes(), (std::vector<std::string>{"ant", "bee", "cat"}));
  ASSERT_EQ(ds->size(), 9);
  EXPECT_EQ(ds->num_classes(), 3);
  for (int64_t i = 0; i < ds->size(); ++i) {
    const std::string cls = ds->classes()[static_cast<size_t>(ds->label(i))];
    EXPECT_NE(ds->path(i).find("/" + cls + "/"), std::string::npos);
    const size_t k = static_cast<size_t>(ds->path(i).back() == 'G' ? ds->path(i)[ds->path(i).size() - 6] - '0' : 0);
    const Made m = kFiles.at(cls)[k];
    EXPECT_EQ(ds->native_size(i), (ImageSize{m.h, m.w})) << ds->path(i);
    const Image img = ds->decode(i, no_downscale);
    ASSERT_EQ(img.h, m.h);
    ASSERT_EQ(img.w, m.w);
    ASSERT_EQ(img.c, 3);
    for (int ch = 0; ch < 3; ++ch)
      EXPECT_NEAR(img.at(m.h / 2, m.w / 2, ch), kColours.at(cls)[static_cast<size_t>(ch)], 6);
  }
}

TEST(JpegFolder, DecodeShrinksByDctScaling) {
  TempDir dir;
  const std::string path = dir.file("big.jpg");
  write_jpeg(path, 80, 120, 10, 20, 30);
  const auto bytes = testing::read_bytes(path);
  const Image quarter = decode_jpeg(bytes, 4.0, path);
  EXPECT_EQ(quarter.h, 20);
  EXPECT_EQ(quarter.w, 30);
  EXPECT_EQ(quarter.native, (ImageSize{80, 120}));
  // TurboJPEG scales by n/8: the smallest factor that keeps at least 1/2.9 of the size is 3/8.
  const Image partial = decode_jpeg(bytes, 2.9, path);
  EXPECT_EQ(partial.w, 45);
  EXPECT_GE(partial.w * 2.9, 120);
  EXPECT_EQ(decode_jpeg(bytes, 1.0, path).w, 120);
}

TEST(JpegFolder, CorruptFileIsNamed) {
  TempDir dir;
  make_folder(dir, "train");
  const std::string bad = (dir.path() / "train" / "ant" / "img0.JPEG").string();
  testing::write_bytes(bad, {0xFF, 0xD8, 0x00, 0x01, 0x02});
  auto ds = JpegFolder::open(dir.path().string(), Split::kTrain);
  try {
    ds->decode(0, no_downscale);
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_THROW(JpegFolder::open(dir.path().string(), Split::kVal), InvalidArgument);
}

TEST(JpegFolder, TrainingCropsAreFullSizeAndFinite) {
  TempDir dir;
  make_folder(dir, "train");
  auto ds = JpegFolder::open(dir.path().string(), Split::kTrain);
  LoaderConfig cfg{
      .mode = Mode::kTrain, .batch_size = 4, .image_size = {24, 24}, .seed = 3, .threads = 2, .prefetch = 2};
  cfg.transform.train_crop = TrainCrop::kRandomResizedCrop;
  cfg.transform.flip = Flip::kHorizontal;
  Loader loader(ds, cfg);
  loader.start_epoch(0);
  int samples = 0;
  while (auto b = loader.next()) {
    ASSERT_EQ(b->h, 24);
    ASSERT_EQ(b->w, 24);
    ASSERT_EQ(b->c, 3);
    for (int i = 0; i < b->n; ++i) {
      // A solid-colour image stays that colour whatever the crop: the dominant channel is the class's.
      const float* px = b->images + static_cast<size_t>(i) * 24 * 24 * 3 + (12 * 24 + 12) * 3;
      const int dominant = static_cast<int>(std::max_element(px, px + 3) - px);
      EXPECT_EQ(dominant, b->labels[i]);
      for (int k = 0; k < 24 * 24 * 3; ++k)
        ASSERT_TRUE(std::isfinite(b->images[static_cast<size_t>(i) * 24 * 24 * 3 + k]));
    }
    samples += b->n;
  }
  EXPECT_EQ(samples, 9);
}

// fast.ai's rectangular validation: batches grouped by aspect ratio, each resized to one aspect-preserving size.
TEST(JpegFolder, RectangularValidationBatchesShareAspect) {
  TempDir dir;
  make_folder(dir, "val");
  auto ds = JpegFolder::open(dir.path().string(), Split::kVal);
  std::multiset<int64_t> seen;
  for (int world : {1, 2}) {
    seen.clear();
    for (int rank = 0; rank < world; ++rank) {
      LoaderConfig cfg{.mode = Mode::kEval,
                       .batch_size = 3,
                       .image_size = {32, 32},
                       .rank = rank,
                       .world = world,
                       .rectangular = Rectangular::kOn};
      const EpochPlan plan = plan_epoch(*ds, cfg, 0);
      double last_aspect = 0;
      for (const PlannedBatch& b : plan.batches) {
        ASSERT_EQ(std::min(b.size.h, b.size.w), 32);
        ASSERT_EQ(std::max(b.size.h, b.size.w) % 8, 0);
        const double batch_aspect = static_cast<double>(b.size.w) / b.size.h;
        EXPECT_GE(batch_aspect, last_aspect);  // sorted by aspect
        last_aspect = batch_aspect;
        double lo = 1e9, hi = 0;
        for (int64_t p = b.begin; p < b.end; ++p) {
          const ImageSize s = ds->native_size(plan.order[static_cast<size_t>(p)]);
          lo = std::min(lo, static_cast<double>(s.w) / s.h);
          hi = std::max(hi, static_cast<double>(s.w) / s.h);
          seen.insert(plan.order[static_cast<size_t>(p)]);
        }
        // The batch's aspect is its members' mean, up to rounding the long side to a multiple of 8.
        EXPECT_GE(batch_aspect, lo * 0.85);
        EXPECT_LE(batch_aspect, hi * 1.15);
      }
      Loader loader(ds, cfg);
      loader.start_epoch(0);
      size_t k = 0;
      while (auto b = loader.next()) {
        ASSERT_EQ(b->h, plan.batches[k].size.h);
        ASSERT_EQ(b->w, plan.batches[k].size.w);
        ++k;
      }
      EXPECT_EQ(k, plan.batches.size());
    }
    ASSERT_EQ(seen.size(), 9u) << "world " << world;
    for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(seen.count(i), 1u);
  }
}

}  // namespace
}  // namespace torus::worker::data

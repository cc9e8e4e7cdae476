#include "worker/data/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <set>

#include "common/util/error.h"
#include "worker/data/synthetic.h"

namespace torus::worker::data {
namespace {

std::shared_ptr<ArrayDataset> small_set(int n = 500) {
  return make_synthetic({.n = n, .h = 12, .w = 10, .c = 3, .classes = 5, .seed = 11});
}

LoaderConfig augmented(int threads, int prefetch) {
  LoaderConfig cfg{.mode = Mode::kTrain, .batch_size = 32, .seed = 77, .threads = threads, .prefetch = prefetch};
  cfg.transform.train_crop = TrainCrop::kPadCrop;
  cfg.transform.pad = 2;
  cfg.transform.flip = Flip::kHorizontal;
  cfg.transform.mean = {0.5f, 0.4f, 0.3f};
  cfg.transform.std = {0.2f, 0.25f, 0.3f};
  return cfg;
}

struct Copied {
  int n, h, w;
  std::vector<float> images;
  std::vector<int32_t> labels;
};

std::vector<Copied> read_epoch(Loader& loader, int64_t epoch, int64_t first_batch = 0) {
  loader.start_epoch(epoch, first_batch);
  std::vector<Copied> out;
  while (auto b = loader.next()) {
    const size_t count = static_cast<size_t>(b->n) * b->h * b->w * b->c;
    out.push_back({b->n, b->h, b->w, std::vector<float>(b->images, b->images + count),
                   std::vector<int32_t>(b->labels, b->labels + b->n)});
  }
  return out;
}

TEST(Loader, PrefetchedBatchesEqualSynchronousReads) {
  auto ds = small_set();
  const LoaderConfig cfg = augmented(3, 2);
  Loader loader(ds, cfg);
  for (int64_t epoch : {0, 1}) {
    const auto batches = read_epoch(loader, epoch);
    const EpochPlan plan = plan_epoch(*ds, cfg, epoch);
    ASSERT_EQ(batches.size(), plan.batches.size());
    ASSERT_EQ(batches.size(), 16u);  // 500 / 32, last one partial
    EXPECT_EQ(batches.back().n, 500 - 15 * 32);
    for (size_t b = 0; b < batches.size(); ++b) {
      std::vector<float> images(batches[b].images.size());
      std::vector<int32_t> labels(static_cast<size_t>(batches[b].n));
      read_batch(*ds, cfg, plan, static_cast<int64_t>(b), images.data(), labels.data());
      ASSERT_EQ(batches[b].images, images) << "epoch " << epoch << " batch " << b;
      ASSERT_EQ(batches[b].labels, labels);
    }
  }
}

// Pixels::kRaw (the device augments): each batch holds the stored u8 pixels of the planned samples, untransformed,
// and no fp32 images; a size other than the native one, or a set decoded from files, is refused.
TEST(Loader, RawBatchesHoldTheStoredPixelsInPlanOrder) {
  auto ds = small_set(100);
  LoaderConfig cfg = augmented(2, 2);
  cfg.pixels = Pixels::kRaw;
  Loader loader(ds, cfg);
  loader.start_epoch(1);
  const EpochPlan plan = plan_epoch(*ds, cfg, 1);
  const size_t per_image = 12 * 10 * 3;
  int64_t b = 0;
  while (auto batch = loader.next()) {
    ASSERT_EQ(batch->images, nullptr);
    ASSERT_NE(batch->raw, nullptr);
    const PlannedBatch& pb = plan.batches[static_cast<size_t>(b)];
    ASSERT_EQ(batch->n, pb.end - pb.begin);
    for (int64_t p = pb.begin; p < pb.end; ++p) {
      const auto index = static_cast<size_t>(plan.order[static_cast<size_t>(p)]);
      const uint8_t* want = ds->pixels().data() + index * per_image;
      ASSERT_EQ(std::memcmp(batch->raw + static_cast<size_t>(p - pb.begin) * per_image, want, per_image), 0)
          << "batch " << b << " sample " << p - pb.begin;
      ASSERT_EQ(batch->labels[p - pb.begin], ds->label(static_cast<int64_t>(index)));
    }
    ++b;
  }
  EXPECT_EQ(b, static_cast<int64_t>(plan.batches.size()));
  cfg.image_size = {8, 8};
  EXPECT_THROW(Loader(ds, cfg), InvalidArgument) << "raw pixels are not resized";
}

TEST(Loader, DeterministicAcrossThreadCountsAndEpochsDiffer) {
  auto ds = small_set();
  Loader one(ds, augmented(1, 1));
  Loader four(ds, augmented(4, 6));
  const auto a = read_epoch(one, 3);
  const auto b = read_epoch(four, 3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].images, b[i].images);
  const auto c = read_epoch(four, 4);
  EXPECT_NE(a[0].labels, c[0].labels);
}

TEST(Loader, ResumeAtBatchKEqualsSkippingKBatches) {
  auto ds = small_set();
  Loader loader(ds, augmented(2, 3));
  const auto full = read_epoch(loader, 5);
  const auto resumed = read_epoch(loader, 5, 7);
  ASSERT_EQ(resumed.size(), full.size() - 7);
  for (size_t i = 0; i < resumed.size(); ++i) {
    ASSERT_EQ(resumed[i].images, full[i + 7].images);
    ASSERT_EQ(resumed[i].labels, full[i + 7].labels);
  }
  loader.start_epoch(5, static_cast<int64_t>(full.size()));
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_THROW(loader.start_epoch(5, static_cast<int64_t>(full.size()) + 1), InvalidArgument);
}

TEST(Loader, RanksTogetherCoverTheEpoch) {
  auto ds = small_set(103);
  std::multiset<int32_t> train_labels, eval_labels, all_labels;
  for (int64_t i = 0; i < ds->size(); ++i) all_labels.insert(ds->label(i));
  for (int rank = 0; rank < 3; ++rank) {
    LoaderConfig train{.batch_size = 8, .seed = 1, .rank = rank, .world = 3, .tail = Tail::kDrop};
    LoaderConfig eval{.mode = Mode::kEval, .batch_size = 8, .rank = rank, .world = 3};
    Loader t(ds, train), e(ds, eval);
    for (const auto& b : read_epoch(t, 0)) train_labels.insert(b.labels.begin(), b.labels.end());
    for (const auto& b : read_epoch(e, 0)) eval_labels.insert(b.labels.begin(), b.labels.end());
    EXPECT_EQ(t.samples_in_epoch(), 34);
  }
  EXPECT_EQ(eval_labels, all_labels);  // exact: no padding in evaluation
  EXPECT_EQ(train_labels.size(), 102u);
}

TEST(Loader, ProgressiveResizingReusesBuffers) {
  auto ds = small_set();
  Loader loader(ds, augmented(2, 2));
  std::set<const float*> buffers;
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    EXPECT_EQ(b->h, 12);
    buffers.insert(b->images);
  }
  loader.set_image_size({8, 8});
  loader.set_batch_size(50);
  loader.start_epoch(1);
  int batches = 0;
  while (auto b = loader.next()) {
    ASSERT_EQ(b->h, 8);
    ASSERT_EQ(b->w, 8);
    ASSERT_EQ(b->n, 50);
    for (int k = 0; k < b->n * 8 * 8 * 3; ++k) ASSERT_TRUE(std::isfinite(b->images[k]));
    buffers.insert(b->images);
    ++batches;
  }
  EXPECT_EQ(batches, 10);
  // The pool holds prefetch + 1 batches; 8x8x50 fits in the 12x10x32 buffers, so nothing new was allocated.
  EXPECT_LE(buffers.size(), 3u);
  EXPECT_GE(loader.wait_seconds(), 0.0);
}

// A data set that fails on one sample, to check errors cross from loader threads to next().
class FailingDataset final : public Dataset {
 public:
  FailingDataset(std::shared_ptr<ArrayDataset> inner, int64_t bad) : inner_(std::move(inner)), bad_(bad) {}
  int64_t size() const override { return inner_->size(); }
  int channels() const override { return inner_->channels(); }
  int num_classes() const override { return inner_->num_classes(); }
  int32_t label(int64_t i) const override { return inner_->label(i); }
  ImageSize native_size(int64_t i) const override { return inner_->native_size(i); }
  Image decode(int64_t i, const DownscalePolicy& p) const override {
    ++decodes;
    if (i == bad_) throw CorruptData("sample " + std::to_string(i) + ": broken on purpose");
    return inner_->decode(i, p);
  }
  std::string describe() const override { return "failing"; }
  mutable std::atomic<int64_t> decodes{0};

 private:
  std::shared_ptr<ArrayDataset> inner_;
  int64_t bad_;
};

TEST(Loader, ThreadExceptionsReachNextInOrder) {
  auto ds = std::make_shared<FailingDataset>(small_set(), 100);  // batch 3 with batch size 32, no shuffle
  LoaderConfig cfg{.batch_size = 32, .shuffle = Shuffle::kOff, .threads = 3, .prefetch = 4};
  cfg.image_size = {12, 10};
  Loader loader(ds, cfg);
  loader.start_epoch(0);
  for (int b = 0; b < 3; ++b) {
    auto batch = loader.next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_EQ(batch->index, b);
  }
  try {
    loader.next();
    FAIL() << "expected the loader thread's CorruptData";
  } catch (const CorruptData& e) {
    EXPECT_NE(std::string(e.what()).find("sample 100: broken on purpose"), std::string::npos);
  }
  EXPECT_THROW(loader.next(), CorruptData);  // stays failed until the next epoch
  loader.start_epoch(0, 4);                  // resuming past the bad batch works
  EXPECT_EQ(loader.next()->index, 4);
}

TEST(Loader, ShutdownMidEpochAbandonsWork) {
  // Large images so an epoch is long; the destructor must stop and join without reading it all.
  auto ds = std::make_shared<FailingDataset>(make_synthetic({.n = 1500, .h = 64, .w = 64, .c = 3, .seed = 2}), -1);
  {
    LoaderConfig cfg{.batch_size = 128, .image_size = {64, 64}, .threads = 2, .prefetch = 2};
    Loader loader(ds, cfg);
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
  }
  // At most the pool (prefetch + 1 batches) plus one batch per thread was ever started.
  EXPECT_LE(ds->decodes.load(), (2 + 1 + 2) * 128);
  { Loader idle(ds, {.image_size = {64, 64}}); }  // never started
  {
    Loader restarted(ds, {.batch_size = 128, .image_size = {64, 64}});
    restarted.start_epoch(0);
    restarted.start_epoch(1);  // abandons epoch 0 mid-way
    EXPECT_EQ(restarted.next()->index, 0);
  }
}

TEST(Loader, MisuseIsReported) {
  auto ds = small_set();
  Loader loader(ds, {});
  EXPECT_THROW(loader.next(), InvalidArgument);
  EXPECT_THROW(Loader(ds, {.batch_size = 0}), InvalidArgument);
  EXPECT_THROW(Loader(ds, {.rank = 2, .world = 2}), InvalidArgument);
  EXPECT_THROW(Loader(ds, {.rectangular = Rectangular::kOn}), InvalidArgument);
  LoaderConfig bad_norm;
  bad_norm.transform.mean = {0.5f};
  EXPECT_THROW(Loader(ds, bad_norm), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::data

#include "worker/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/util/error.h"

namespace torus::worker::data {
namespace {

TEST(Sampler, PermutationIsDeterministicAndEpochsDiffer) {
  const auto a = epoch_permutation(1000, 42, 3);
  EXPECT_EQ(a, epoch_permutation(1000, 42, 3));
  EXPECT_NE(a, epoch_permutation(1000, 42, 4));
  EXPECT_NE(a, epoch_permutation(1000, 43, 3));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
}

// Every sample once per epoch across the ranks; with padding, the extra reads are the wrap-around of the order.
TEST(Sampler, RanksTogetherSeeEverySampleOncePerEpoch) {
  for (int64_t n : {1, 7, 100, 101, 999}) {
    for (int world = 1; world <= 8; ++world) {
      for (Tail tail : {Tail::kPad, Tail::kDrop}) {
        std::map<int64_t, int> seen;
        const int64_t per_rank = samples_per_rank(n, world, tail);
        for (int rank = 0; rank < world; ++rank) {
          const auto mine = shard_train(n, {.seed = 5, .epoch = 2, .rank = rank, .world = world, .tail = tail});
          ASSERT_EQ(static_cast<int64_t>(mine.size()), per_rank) << "n=" << n << " world=" << world;
          for (int64_t i : mine) ++seen[i];
        }
        if (tail == Tail::kPad) {
          ASSERT_EQ(static_cast<int64_t>(seen.size()), n) << "n=" << n << " world=" << world;
          int64_t repeats = 0;
          for (auto [i, count] : seen) repeats += count - 1;
          EXPECT_EQ(repeats, per_rank * world - n);
          EXPECT_LT(repeats, world);
        } else {
          ASSERT_EQ(static_cast<int64_t>(seen.size()), n / world * world);
          for (auto [i, count] : seen) ASSERT_EQ(count, 1);
        }
      }
    }
  }
}

// PyTorch's DistributedSampler: rank r takes padded positions r, r + world, ...; padding repeats the order's start.
TEST(Sampler, ShardingMatchesDistributedSamplerLayout) {
  const auto order = epoch_permutation(10, 9, 1);
  const auto rank1 = shard_train(10, {.seed = 9, .epoch = 1, .rank = 1, .world = 4, .tail = Tail::kPad});
  // padded order: o0..o9, o0, o1; rank 1 takes positions 1, 5, 9
  EXPECT_EQ(rank1, (std::vector<int64_t>{order[1], order[5], order[9]}));
  const auto rank3 = shard_train(10, {.seed = 9, .epoch = 1, .rank = 3, .world = 4, .tail = Tail::kPad});
  EXPECT_EQ(rank3, (std::vector<int64_t>{order[3], order[7], order[1]}));
  const auto dropped = shard_train(10, {.seed = 9, .epoch = 1, .rank = 1, .world = 4, .tail = Tail::kDrop});
  EXPECT_EQ(dropped, (std::vector<int64_t>{order[1], order[5]}));
  const auto unshuffled = shard_train(10, {.rank = 2, .world = 4, .shuffle = Shuffle::kOff});
  EXPECT_EQ(unshuffled, (std::vector<int64_t>{2, 6, 0}));
}

TEST(Sampler, EvalShardsSumExactly) {
  for (int64_t n : {0, 1, 13, 10000}) {
    for (int world = 1; world <= 8; ++world) {
      std::vector<int> seen(static_cast<size_t>(n));
      for (int rank = 0; rank < world; ++rank) {
        for (int64_t i : shard_eval(n, rank, world)) ++seen[static_cast<size_t>(i)];
      }
      for (int count : seen) ASSERT_EQ(count, 1);
    }
  }
}

TEST(Sampler, ResumeAtBatchKEqualsSkippingKBatches) {
  const auto order = shard_train(1003, {.seed = 1, .epoch = 7, .rank = 2, .world = 3});
  const auto batches = split_batches(static_cast<int64_t>(order.size()), 32, LastBatch::kKeep);
  ASSERT_EQ(batches.size(), 11u);  // 335 samples per rank
  EXPECT_EQ(batches.back().size(), 335 - 10 * 32);
  // The order does not depend on where reading starts: batch k is the same slice either way.
  const auto again = shard_train(1003, {.seed = 1, .epoch = 7, .rank = 2, .world = 3});
  for (size_t k = 0; k < batches.size(); ++k) {
    EXPECT_TRUE(
        std::equal(order.begin() + batches[k].begin, order.begin() + batches[k].end, again.begin() + batches[k].begin));
  }
  EXPECT_EQ(split_batches(335, 32, LastBatch::kDrop).size(), 10u);
}

TEST(Sampler, BadArgumentsAreNamed) {
  EXPECT_THROW(shard_train(10, {.rank = 4, .world = 4}), InvalidArgument);
  EXPECT_THROW(shard_eval(10, 0, 0), InvalidArgument);
  EXPECT_THROW(split_batches(10, 0, LastBatch::kKeep), InvalidArgument);
  try {
    shard_train(10, {.rank = 5, .world = 2});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos);
  }
}

}  // namespace
}  // namespace torus::worker::data

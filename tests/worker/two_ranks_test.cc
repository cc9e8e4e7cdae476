// Two ranks in one process (threads) through the sync.h hooks: gradients averaged in finish_step, BN statistics
// averaged and evaluation counts summed through Collectives. Both ranks must end with identical parameters and
// evaluate the whole validation set exactly once between them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <thread>

#include "tests/support/temp_dir.h"
#include "tests/worker/thread_collectives.h"
#include "tests/worker/two_rank_training.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using testing::Rendezvous;
using testing::ThreadCollectives;

using testing::AveragingSync;
using testing::two_rank_config;

struct RankOutcome : testing::TrainedRank {
  bool order_ok = false;
};

// Runs both ranks (rank 1 on a thread); `resume` makes each call resume() first.
std::array<RankOutcome, 2> run_two_ranks(const TrainConfig& c, const Datasets& data, int64_t max_steps, bool resume) {
  Rendezvous rendezvous(2);
  return testing::on_two_ranks<RankOutcome>([&](int rank, RankOutcome& o) {
    auto backend = cpu::make_cpu_backend(1);
    ThreadCollectives coll(rendezvous, rank, 2);
    AveragingSync* sync = nullptr;
    auto factory = [&](const Arena& grads) -> std::unique_ptr<GradientSync> {
      auto s = std::make_unique<AveragingSync>(coll, grads);
      sync = s.get();
      return s;
    };
    Trainer t(*backend, c, data, coll, factory);
    testing::train_and_record(t, resume, max_steps, o);
    o.order_ok = sync != nullptr && sync->order_ok;
  });
}

TEST(TwoRanks, TrainInLockstepAndEvaluateTheWholeSetOnce) {
  const TrainConfig c = two_rank_config();
  const auto out = run_two_ranks(c, load_datasets(c.data, c.seed), 0, false);
  ASSERT_EQ(out[0].error, "");
  ASSERT_EQ(out[1].error, "");
  EXPECT_TRUE(out[0].order_ok);
  EXPECT_TRUE(out[1].order_ok);
  EXPECT_EQ(out[0].result.steps, 2 * 8);  // 256 / (2 ranks x 16) batches per epoch
  EXPECT_EQ(out[0].params, out[1].params);
  EXPECT_EQ(out[0].stats, out[1].stats);  // averaged before evaluation
  EXPECT_EQ(out[0].result.last_eval.samples, 100);
  EXPECT_EQ(out[1].result.last_eval.samples, 100);
  EXPECT_DOUBLE_EQ(out[0].result.last_eval.top1, out[1].result.last_eval.top1);
}

TEST(TwoRanks, OnlyRankZeroReadsTheCheckpointAndBothResumeThere) {
  TrainConfig c = two_rank_config();
  const Datasets data = load_datasets(c.data, c.seed);
  const auto straight = run_two_ranks(c, data, 0, false);
  ASSERT_EQ(straight[0].error, "");
  const test::TempDir tmp("torus-two-ranks");
  c.checkpoint.dir = tmp.str();
  c.checkpoint.every_steps = 5;
  c.checkpoint.every_epochs = 0;
  const auto first = run_two_ranks(c, data, 5, false);  // rank 0 writes ckpt-5; rank 1 writes nothing
  ASSERT_EQ(first[0].error, "");
  const auto second = run_two_ranks(c, data, 0, true);
  ASSERT_EQ(second[0].error, "");
  ASSERT_EQ(second[1].error, "");
  EXPECT_TRUE(second[0].resumed);
  EXPECT_TRUE(second[1].resumed);  // from rank 0's broadcast
  EXPECT_EQ(second[1].start_step, 5);
  EXPECT_EQ(second[0].result.steps, 16);
  EXPECT_EQ(second[0].params, second[1].params);
  EXPECT_EQ(second[0].params, straight[0].params);  // stopping and resuming changed nothing
}

}  // namespace
}  // namespace torus::worker::train

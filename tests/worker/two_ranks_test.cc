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
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using testing::Rendezvous;
using testing::ThreadCollectives;

// Averages the whole gradient arena in finish_step; checks grad_ready's contract on the way.
class AveragingSync final : public GradientSync {
 public:
  AveragingSync(Collectives& c, const Arena& grads) : c_(c), grads_(grads) {}
  void begin_step() override { seen_.clear(); }
  void grad_ready(size_t i) override {
    if (!seen_.empty() && i >= seen_.back()) order_ok = false;
    seen_.push_back(i);
  }
  void finish_step() override {
    if (seen_.size() != grads_.size()) order_ok = false;
    std::span<float> g = grads_.all().span();
    c_.all_reduce_sum(g);
    for (float& v : g) v /= static_cast<float>(c_.world_size());
  }
  bool order_ok = true;

 private:
  Collectives& c_;
  const Arena& grads_;
  std::vector<size_t> seen_;
};

TrainConfig two_rank_config() {
  TrainConfig c;
  c.model.widths = {8, 16, 32};
  c.model.num_classes = 4;
  c.data.dataset = DatasetKind::kSynthetic;
  c.data.synthetic_train = 256;
  c.data.synthetic_val = 100;
  c.data.synthetic_classes = 4;
  c.data.synthetic_size = 16;
  c.data.loader_threads = 1;
  c.epochs = 2;
  c.phases = {{0, 16, 16}};  // per rank: 2 x 16 = global batch 32
  c.lr_points = {{0, 0.1}, {2, 0.0}};
  c.label_smoothing = 0.1f;
  c.seed = 9;
  c.eval_batch_size = 32;
  c.log_every_steps = 0;
  return c;
}

struct RankOutcome {
  RunResult result;
  std::vector<float> params, stats;
  bool order_ok = false;
  bool resumed = false;
  int64_t start_step = 0;
  std::string error;
};

// Runs both ranks (rank 1 on a thread); `resume` makes each call resume_latest() first.
std::array<RankOutcome, 2> run_two_ranks(const TrainConfig& c, const Datasets& data, int64_t max_steps, bool resume) {
  Rendezvous rendezvous(2);
  std::array<RankOutcome, 2> out;
  auto rank_main = [&](int rank) {
    RankOutcome& o = out[static_cast<size_t>(rank)];
    try {
      auto backend = cpu::make_cpu_backend(1);
      ThreadCollectives coll(rendezvous, rank, 2);
      AveragingSync* sync = nullptr;
      auto factory = [&](const Arena& grads) -> std::unique_ptr<GradientSync> {
        auto s = std::make_unique<AveragingSync>(coll, grads);
        sync = s.get();
        return s;
      };
      Trainer t(*backend, c, data, coll, factory);
      if (resume) o.resumed = t.resume_latest();
      o.start_step = t.step();
      o.result = t.run(max_steps);
      o.params = nn::export_plain(t.model().context(), t.model().context().params);
      o.stats = nn::export_plain(t.model().context(), t.model().context().stats);
      o.order_ok = sync != nullptr && sync->order_ok;
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  };
  std::thread r1(rank_main, 1);
  rank_main(0);
  r1.join();
  return out;
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

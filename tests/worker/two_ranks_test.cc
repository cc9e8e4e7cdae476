// Two ranks in one process (threads) through the sync.h hooks: gradients averaged in finish_step, BN statistics
// averaged and evaluation counts summed through Collectives. Both ranks must end with identical parameters and
// evaluate the whole validation set exactly once between them.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/util/error.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

// A sum across threads: every rank deposits, the last one publishes the total for that round.
class Rendezvous {
 public:
  explicit Rendezvous(int world) : world_(world) {}
  std::vector<double> sum(const std::vector<double>& mine) {
    std::unique_lock lock(mu_);
    const int64_t round = round_;
    std::vector<double>& acc = pending_[round];
    if (acc.empty()) acc.assign(mine.size(), 0.0);
    for (size_t i = 0; i < mine.size(); ++i) acc[i] += mine[i];
    if (++arrived_ == world_) {
      results_[round] = std::move(acc);
      pending_.erase(round);
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(120), [&] { return round_ > round; })) {
      throw Timeout("rendezvous: the other rank never arrived");
    }
    return results_.at(round);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int world_;
  int arrived_ = 0;
  int64_t round_ = 0;
  std::map<int64_t, std::vector<double>> pending_, results_;
};

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(Rendezvous& r, int rank, int world) : r_(r), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce_sum(std::span<double> v) override {
    auto total = r_.sum(std::vector<double>(v.begin(), v.end()));
    std::copy(total.begin(), total.end(), v.begin());
  }
  void all_reduce_sum(std::span<float> v) override {
    auto total = r_.sum(std::vector<double>(v.begin(), v.end()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(total[i]);
  }
  void broadcast(std::span<float> v, int root) override {
    std::vector<double> mine(v.size(), 0.0);
    if (rank_ == root) mine.assign(v.begin(), v.end());
    auto total = r_.sum(mine);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(total[i]);
  }
  void barrier() override { r_.sum({}); }

 private:
  Rendezvous& r_;
  int rank_, world_;
};

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

TEST(TwoRanks, TrainInLockstepAndEvaluateTheWholeSetOnce) {
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
  const Datasets data = load_datasets(c.data, c.seed);

  Rendezvous rendezvous(2);
  std::vector<float> params[2];
  std::vector<float> stats[2];
  RunResult results[2];
  bool order_ok[2] = {false, false};
  std::string errors[2];
  auto rank_main = [&](int rank) {
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
      results[rank] = t.run();
      params[rank] = nn::export_plain(t.model().context(), t.model().context().params);
      stats[rank] = nn::export_plain(t.model().context(), t.model().context().stats);
      order_ok[rank] = sync != nullptr && sync->order_ok;
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  };
  std::thread r1(rank_main, 1);
  rank_main(0);
  r1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_TRUE(order_ok[0]);
  EXPECT_TRUE(order_ok[1]);
  EXPECT_EQ(results[0].steps, 2 * 8);  // 256 / (2 ranks x 16) batches per epoch
  EXPECT_EQ(params[0], params[1]);
  EXPECT_EQ(stats[0], stats[1]);  // averaged before evaluation
  EXPECT_EQ(results[0].last_eval.samples, 100);
  EXPECT_EQ(results[1].last_eval.samples, 100);
  EXPECT_DOUBLE_EQ(results[0].last_eval.top1, results[1].last_eval.top1);
}

}  // namespace
}  // namespace torus::worker::train

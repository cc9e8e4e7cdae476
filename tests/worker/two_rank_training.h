#pragma once
// Two training ranks as threads of one test (rank 1 on a thread, rank 0 on the caller's): the harness the
// data-parallel trainer tests share. Each test builds its own backend and collectives in `body`.
#include <array>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/train_config_builder.h"
#include "worker/train/trainer.h"

namespace torus::worker::train::testing {

// A small synthetic job for two ranks: 16 images per rank and step (global batch 32), 8 steps an epoch, 2 epochs.
inline TrainConfig two_rank_config() {
  return test::TrainConfigBuilder()
      .synthetic(256, 100)
      .epochs(2)
      .per_rank_batch(16)
      .lr({{0, 0.1}, {2, 0.0}})
      .label_smoothing(0.1f)
      .seed(9)
      .eval_batch(32)
      .build();
}

// Averages the whole gradient arena in finish_step, through `c`; checks grad_ready's contract on the way (every
// parameter once a step, in reverse order).
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

// What the two-rank tests compare after a run; tests extend it with their own observations.
struct TrainedRank {
  RunResult result;
  std::vector<float> params, stats;
  bool resumed = false;
  int64_t start_step = 0;
  std::string error;  // what the rank threw, "" when it ended normally
};

// Resumes from the newest checkpoint when asked, trains up to `max_steps` (0: the whole schedule) and records
// the outcome, parameters and statistics.
inline void train_and_record(Trainer& t, bool resume, int64_t max_steps, TrainedRank& o) {
  if (resume) o.resumed = t.resume().from_checkpoint();
  o.start_step = t.step();
  o.result = t.run(max_steps);
  o.params = nn::export_plain(t.model().context(), t.model().context().params);
  o.stats = nn::export_plain(t.model().context(), t.model().context().stats);
}

// Runs body(rank, outcome) for ranks 0 and 1 at once; an exception becomes that rank's `error`.
template <class Outcome>
std::array<Outcome, 2> on_two_ranks(const std::function<void(int, Outcome&)>& body) {
  std::array<Outcome, 2> out;
  auto rank_main = [&](int rank) {
    Outcome& o = out[static_cast<size_t>(rank)];
    try {
      body(rank, o);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  return out;
}

}  // namespace torus::worker::train::testing

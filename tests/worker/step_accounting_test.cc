// Where a training step's time goes (ProgressEvent of kind kStep): data wait, compute, and the communication wait
// in which the step blocks after its own work (GradientSync::finish_step, the per-step stop agreement). The fakes
// below block on a known condition (a releaser thread lets each call go only after the clock has moved past its
// entry), so the assertions are relationships between measured times, never durations.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/util/error.h"
#include "tests/support/train_config_builder.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using Clock = std::chrono::steady_clock;

// Holds each caller of pass() until a releaser thread lets it go, which it does only once the clock has moved past
// the caller's entry: every pass() blocks for a positive time. Records how long each call was held.
class Gate {
 public:
  Gate() : releaser_([this] { release_loop(); }) {}
  ~Gate() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    releaser_.join();
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void pass() {
    std::unique_lock lock(mu_);
    const auto entered = Clock::now();
    entered_at_ = entered;
    const int64_t ticket = ++entered_count_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return released_count_ >= ticket; }))
      throw Timeout("gate: the releaser never let call " + std::to_string(ticket) + " go");
    held_.push_back(std::chrono::duration<double>(Clock::now() - entered).count());
  }

  std::vector<double> held() const {
    std::lock_guard lock(mu_);
    return held_;
  }

 private:
  void release_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || entered_count_ > released_count_; });
      if (stopping_) return;
      const auto entered = entered_at_;
      lock.unlock();
      while (Clock::now() <= entered) std::this_thread::yield();  // a later instant than the caller's entry
      lock.lock();
      ++released_count_;
      cv_.notify_all();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point entered_at_{};
  int64_t entered_count_ = 0;
  int64_t released_count_ = 0;
  bool stopping_ = false;
  std::vector<double> held_;
  std::thread releaser_;
};

// One rank's gradient sync whose finish_step blocks at the gate, as a rank blocks on all-reduce work handles when
// backward did not hide the communication (or a peer is behind).
class GatedSync final : public GradientSync {
 public:
  explicit GatedSync(Gate& gate) : gate_(gate) {}
  void begin_step() override {}
  void grad_ready(size_t /*param_index*/) override {}
  void finish_step() override { gate_.pass(); }

 private:
  Gate& gate_;
};

// Two ranks where the second mirrors the first exactly: sums are twice this rank's values. The one-value double
// all-reduce of each step (the stop agreement) blocks at the gate when one is given.
class MirroredPair final : public Collectives {
 public:
  explicit MirroredPair(Gate* stop_gate) : stop_gate_(stop_gate) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce_sum(std::span<double> values) override {
    if (values.size() == 1 && stop_gate_ != nullptr) stop_gate_->pass();
    for (double& v : values) v *= 2;
  }
  void all_reduce_sum(std::span<float> values) override {
    for (float& v : values) v *= 2;
  }
  void broadcast(std::span<float> /*values*/, int /*root*/) override {}
  void barrier() override {}

 private:
  Gate* stop_gate_;
};

// Records step events; raises `flag` (when given) while step `raise_at` is reported.
class StepRecorder final : public TrainObserver {
 public:
  explicit StepRecorder(std::atomic<bool>* flag = nullptr, int64_t raise_at = 0) : flag_(flag), raise_at_(raise_at) {}
  void on_event(const ProgressEvent& e) override {
    if (e.kind != EventKind::kStep) return;
    steps.push_back(e);
    if (flag_ != nullptr && e.step == raise_at_) flag_->store(true);
  }
  std::vector<ProgressEvent> steps;

 private:
  std::atomic<bool>* flag_;
  int64_t raise_at_;
};

// 192 synthetic 8x8 images: 12 batches of 16 alone, 6 as rank 0 of 2.
TrainConfig tiny_config() {
  return test::TrainConfigBuilder()
      .widths({8, 8, 16})
      .synthetic(192, 32)
      .image_size(8)
      .per_rank_batch(16)
      .lr({{0, 0.05}})
      .seed(4)
      .eval_batch(32)
      .build();
}

// Every step's parts fit inside it and none is negative.
void expect_parts_fit(const ProgressEvent& e) {
  EXPECT_GE(e.data_wait_seconds, 0) << "step " << e.step;
  EXPECT_GT(e.compute_seconds, 0) << "step " << e.step;  // forward, backward and update ran
  EXPECT_GE(e.comm_wait_seconds, 0) << "step " << e.step;
  EXPECT_LE(e.data_wait_seconds + e.compute_seconds + e.comm_wait_seconds, e.step_seconds) << "step " << e.step;
}

TEST(StepAccounting, TimeBlockedOnTheGradientAllReduceIsCommunicationWaitNotCompute) {
  const TrainConfig config = tiny_config();
  auto backend = cpu::make_cpu_backend(1);
  LocalCollectives alone;
  Gate gate;
  auto factory = [&](const Arena& /*grads*/) -> std::unique_ptr<GradientSync> {
    return std::make_unique<GatedSync>(gate);
  };
  StepRecorder rec;
  Trainer trainer(*backend, config, load_datasets(config.data, config.seed), alone, factory, &rec);
  trainer.run(4);
  const std::vector<double> held = gate.held();
  ASSERT_EQ(rec.steps.size(), 4u);
  ASSERT_EQ(held.size(), 4u);  // one finish_step per step
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    const ProgressEvent& e = rec.steps[i];
    expect_parts_fit(e);
    EXPECT_GT(held[i], 0) << "step " << e.step;
    // The step's wait encloses the time the gate held finish_step: it is counted as communication wait, in full.
    EXPECT_GE(e.comm_wait_seconds, held[i]) << "step " << e.step;
    EXPECT_LE(e.compute_seconds, e.step_seconds - held[i]) << "step " << e.step;
  }
}

TEST(StepAccounting, OneRankAloneStillAccountsForEveryStep) {
  const TrainConfig config = tiny_config();
  auto backend = cpu::make_cpu_backend(1);
  LocalCollectives alone;
  StepRecorder rec;
  Trainer trainer(*backend, config, load_datasets(config.data, config.seed), alone, nullptr, &rec);
  trainer.run(3);
  ASSERT_EQ(rec.steps.size(), 3u);
  for (const ProgressEvent& e : rec.steps) expect_parts_fit(e);
}

TEST(StepAccounting, TheStopAgreementIsCommunicationWaitAndStillStopsTheRun) {
  const TrainConfig config = tiny_config();
  auto backend = cpu::make_cpu_backend(1);
  Gate gate;
  MirroredPair pair(&gate);
  std::atomic<bool> stop{false};
  // The flag is raised while step 2 is reported, after its agreement: the ranks agree to stop after step 3.
  StepRecorder rec(&stop, 2);
  Trainer trainer(*backend, config, load_datasets(config.data, config.seed), pair, nullptr, &rec);
  trainer.set_stop_flag(&stop);
  const RunResult r = trainer.run();
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps, 3);
  const std::vector<double> held = gate.held();
  ASSERT_EQ(rec.steps.size(), 3u);
  ASSERT_EQ(held.size(), 3u);  // one agreement per step
  for (size_t i = 0; i < rec.steps.size(); ++i) {
    expect_parts_fit(rec.steps[i]);
    EXPECT_GE(rec.steps[i].comm_wait_seconds, held[i]) << "step " << rec.steps[i].step;
  }
}

}  // namespace
}  // namespace torus::worker::train

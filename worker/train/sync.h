#pragma once
// Where the training loop meets the communication layer. The loop only calls these interfaces; the comm layer
// (worker/comm) plugs in real implementations, and the single-process ones below make a rank train alone.
#include <cstddef>
#include <span>

namespace torus::worker::train {

// Gradient averaging across ranks, overlapped with backward.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Before the forward pass of a step.
  virtual void begin_step() = 0;
  // Parameter `param_index`'s gradient (its span of the gradient arena) is final. Called in backward order
  // (decreasing parameter index), so buckets of adjacent parameters can be reduced while backward continues.
  virtual void grad_ready(size_t param_index) = 0;
  // Blocks until every gradient in the arena holds the average over all ranks.
  virtual void finish_step() = 0;
  // Whether a captured step (a CUDA Graph of forward, backward, these calls and the update) can hold this sync's
  // work: its collectives recorded into the graph by the calls above at capture, nothing but replayed() to redo on
  // the host per step. Host collectives cannot be.
  virtual bool capturable() const { return false; }
  // After each replay of a captured step: the host-side part of a step (watching its collectives).
  virtual void replayed() {}
};

// The collectives the loop needs outside the gradient path: metrics, BN statistics, the initial broadcast.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual void all_reduce_sum(std::span<double> values) = 0;
  virtual void all_reduce_sum(std::span<float> values) = 0;
  virtual void broadcast(std::span<float> values, int root) = 0;
  virtual void barrier() = 0;
};

// One rank alone: the gradient is already the average.
class LocalGradientSync final : public GradientSync {
 public:
  void begin_step() override {}
  void grad_ready(size_t /*param_index*/) override {}
  void finish_step() override {}
};

class LocalCollectives final : public Collectives {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(std::span<double> /*values*/) override {}
  void all_reduce_sum(std::span<float> /*values*/) override {}
  void broadcast(std::span<float> /*values*/, int /*root*/) override {}
  void barrier() override {}
};

}  // namespace torus::worker::train

#pragma once
// The training loop's interfaces (worker/train/sync.h) implemented over a communicator: gradients through the
// bucketed GradientReducer, the small collectives through the communicator's queue (waited with its timeout).
#include <span>
#include <vector>

#include "worker/comm/bucketing.h"
#include "worker/comm/communicator.h"
#include "worker/train/sync.h"

namespace torus::comm {

class CommGradientSync final : public worker::train::GradientSync {
 public:
  CommGradientSync(Communicator& comm, std::span<float> arena, std::vector<ParamSpan> params,
                   const ReducerOptions& options)
      : reducer_(comm, arena, std::move(params), options) {}
  void begin_step() override { reducer_.begin_step(); }
  void grad_ready(size_t param_index) override { reducer_.mark_ready(param_index); }
  void finish_step() override { reducer_.wait(); }
  GradientReducer& reducer() { return reducer_; }

 private:
  GradientReducer reducer_;
};

class CommCollectives final : public worker::train::Collectives {
 public:
  explicit CommCollectives(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int world_size() const override { return comm_.size(); }
  void all_reduce_sum(std::span<double> values) override { run(comm_.all_reduce(view_of(values))); }
  void all_reduce_sum(std::span<float> values) override { run(comm_.all_reduce(view_of(values))); }
  void broadcast(std::span<float> values, int root) override { run(comm_.broadcast(view_of(values), root)); }
  void barrier() override { run(comm_.barrier()); }

 private:
  // A backstop only: the watchdog and the backends' own timeouts end a stuck collective first.
  void run(const Work& w) { w.wait(comm_.timeout() * 2); }
  Communicator& comm_;
};

}  // namespace torus::comm

#pragma once
// The training loop's interfaces (worker/train/sync.h) implemented over a communicator: gradients through the
// bucketed GradientReducer, the small collectives through the communicator's queue (waited with its timeout). They
// live with the composition root, the one place that knows both the training loop and the comm layer.
#include <memory>
#include <span>
#include <vector>

#include "worker/comm/bucketing.h"
#include "worker/comm/communicator.h"
#include "worker/train/sync.h"

namespace torus::worker::app {

class CommGradientSync final : public train::GradientSync {
 public:
  CommGradientSync(comm::Communicator& comm, std::span<float> arena, std::vector<comm::ParamSpan> params,
                   const comm::ReducerOptions& options)
      : reducer_(comm, arena, std::move(params), options) {}
  void begin_step() override { reducer_.begin_step(); }
  void grad_ready(size_t param_index) override { reducer_.mark_ready(param_index); }
  void finish_step() override { reducer_.wait(); }
  comm::GradientReducer& reducer() { return reducer_; }

 private:
  comm::GradientReducer reducer_;
};

// A gradient averaging of the comm layer with the GradientSync calls but not its type (comm::NcclGradientSync) as
// the training loop's GradientSync: owning it (the worker), or borrowing it (tests that also drain it).
template <class Sync>
class GradientSyncOf final : public train::GradientSync {
 public:
  explicit GradientSyncOf(std::unique_ptr<Sync> owned) : owned_(std::move(owned)), sync_(*owned_) {}
  explicit GradientSyncOf(Sync& borrowed) : sync_(borrowed) {}
  void begin_step() override { sync_.begin_step(); }
  void grad_ready(size_t param_index) override { sync_.grad_ready(param_index); }
  void finish_step() override { sync_.finish_step(); }
  bool capturable() const override { return sync_.capturable(); }
  void replayed() override { sync_.replayed(); }
  Sync& sync() { return sync_; }

 private:
  std::unique_ptr<Sync> owned_;
  Sync& sync_;
};

class CommCollectives final : public train::Collectives {
 public:
  explicit CommCollectives(comm::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int world_size() const override { return comm_.size(); }
  void all_reduce_sum(std::span<double> values) override { run(comm_.all_reduce(comm::view_of(values))); }
  void all_reduce_sum(std::span<float> values) override { run(comm_.all_reduce(comm::view_of(values))); }
  void broadcast(std::span<float> values, int root) override { run(comm_.broadcast(comm::view_of(values), root)); }
  void barrier() override { run(comm_.barrier()); }

 private:
  // A backstop only: the watchdog and the backends' own timeouts end a stuck collective first.
  void run(const comm::Work& w) { w.wait(comm_.timeout() * 2); }
  comm::Communicator& comm_;
};

}  // namespace torus::worker::app

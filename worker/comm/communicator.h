#pragma once
// The communicator interface every backend implements (Gloo on CPU, NCCL on GPU, shared memory within a host,
// and the topology-aware composite). Collectives are asynchronous: each call is queued to the communicator's own
// communication thread, in call order, and returns a Work handle. Reduce-scatter and all-gather are in place over
// the whole buffer: rank r's part is chunk_range(count, size, r) (see types.h).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "worker/comm/types.h"

namespace torus::comm {

using std::chrono::milliseconds;

// What a collective was, for logs, the watchdog and metrics.
struct CollectiveInfo {
  // The name of the communicator it ran on, as its watchdog knows it ("world", "nccl-gradients"; empty when not
  // watched). Each communicator numbers its collectives from 1 on its own: a sequence means nothing without it.
  std::string communicator;
  uint64_t sequence = 0;
  std::string name;  // "all_reduce", "broadcast", ...
  size_t bytes = 0;
  std::string algorithm;  // "ring", "hierarchical", "torus2d", "shm", ...
};
std::string describe(const CollectiveInfo& info);

namespace detail {
struct WorkState {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  CollectiveInfo info;
  std::chrono::steady_clock::time_point started;
  double seconds = 0;  // how long the collective ran on the communication thread
};
}  // namespace detail

// Handle to one queued collective. Copyable; a default-constructed Work is already complete.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  bool completed() const;
  // Blocks until the collective finished; rethrows its error. Throws Timeout (naming the collective) when it has not
  // finished within `timeout`; the collective itself keeps running (the watchdog decides about aborting).
  void wait(milliseconds timeout) const;
  // The error it failed with, or null (also while still running).
  std::exception_ptr error() const;
  const CollectiveInfo& info() const;
  double seconds() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

class Watchdog;

class Communicator {
 public:
  Communicator(int rank, int size, milliseconds timeout);
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  milliseconds timeout() const { return timeout_; }

  // Asynchronous collectives, run in call order on the communication thread. The buffer must stay alive and
  // untouched until the Work completes.
  Work all_reduce(BufferView buf, ReduceOp op = ReduceOp::kSum);
  Work reduce_scatter(BufferView buf, ReduceOp op = ReduceOp::kSum);
  Work all_gather(BufferView buf);
  Work broadcast(BufferView buf, int root);
  Work barrier();

  // Blocking forms, executed on the calling thread: what the async forms run, and what composite algorithms call on
  // their sub-communicators. Not thread-safe against each other: one caller at a time.
  virtual void all_reduce_now(BufferView buf, ReduceOp op) = 0;
  virtual void reduce_scatter_now(BufferView buf, ReduceOp op) = 0;
  virtual void all_gather_now(BufferView buf) = 0;
  virtual void broadcast_now(BufferView buf, int root) = 0;
  virtual void barrier_now() = 0;

  // Collective over all ranks: ranks with the same color form a sub-communicator ordered by (key, rank); a negative
  // color takes part but gets nullptr. Blocking.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  virtual std::string backend() const = 0;
  // The algorithm all_reduce would use for `bytes` (for logs and metrics).
  virtual std::string algorithm_for(size_t /*bytes*/) const { return backend(); }
  // Unblocks and fails every in-flight and future collective (watchdog, shutdown). Never throws.
  virtual void abort() noexcept {}

  // Runs `body` on the communication thread, in order with the collectives (gradient buckets: compress, reduce,
  // decompress as one unit). `body` calls the blocking *_now forms.
  Work submit(std::string name, size_t bytes, std::function<void()> body) {
    return enqueue(std::move(name), bytes, std::move(body));
  }

  // Every collective queued from now on is registered with `watchdog` (sequence numbers, deadlines) under `name`,
  // which every rank gives the same communicator: the watchdog keeps each name's sequences apart (a rank's progress
  // on one communicator says nothing about another's). Call it before queueing collectives.
  void set_watchdog(std::shared_ptr<Watchdog> watchdog, std::string name);
  uint64_t last_sequence() const;

 protected:
  // Stops the communication thread; derived destructors call it first, so no collective runs on a half-destroyed
  // object.
  void stop_thread() noexcept;

 private:
  Work enqueue(std::string name, size_t bytes, std::function<void()> body);
  void run_queue();

  int rank_;
  int size_;
  milliseconds timeout_;
  mutable std::mutex mu_;
  std::shared_ptr<Watchdog> watchdog_;  // guarded by mu_, like watch_name_
  std::string watch_name_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<detail::WorkState>, std::function<void()>>> queue_;
  uint64_t next_sequence_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace torus::comm

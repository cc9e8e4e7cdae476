#include "worker/comm/communicator.h"

#include <sstream>

#include "common/util/error.h"
#include "worker/comm/watchdog.h"

namespace torus::comm {

std::string describe(const CollectiveInfo& info) {
  std::ostringstream os;
  if (!info.communicator.empty()) os << info.communicator << ' ';
  os << info.name << " #" << info.sequence << " (" << info.bytes << " bytes, " << info.algorithm << ")";
  return os.str();
}

bool Work::completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mu);
  return state_->done;
}

void Work::wait(milliseconds timeout) const {
  if (!state_) return;
  std::unique_lock lock(state_->mu);
  if (!state_->done_cv.wait_for(lock, timeout, [&] { return state_->done; }))
    throw Timeout("collective " + describe(state_->info) + " did not finish within " + std::to_string(timeout.count()) +
                  " ms");
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->mu);
  return state_->error;
}

const CollectiveInfo& Work::info() const {
  static const CollectiveInfo kNone;
  return state_ ? state_->info : kNone;
}

double Work::seconds() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->mu);
  return state_->seconds;
}

Communicator::Communicator(int rank, int size, milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout), thread_([this] { run_queue(); }) {}

Communicator::~Communicator() { stop_thread(); }

void Communicator::stop_thread() noexcept {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Communicator::set_watchdog(std::shared_ptr<Watchdog> watchdog, std::string name) {
  if (watchdog && name.empty()) throw InvalidArgument("set_watchdog: a watched communicator needs a name");
  std::lock_guard lock(mu_);
  watchdog_ = std::move(watchdog);
  watch_name_ = watchdog_ ? std::move(name) : std::string();
}

uint64_t Communicator::last_sequence() const {
  std::lock_guard lock(mu_);
  return next_sequence_ - 1;
}

Work Communicator::enqueue(std::string name, size_t bytes, std::function<void()> body) {
  auto state = std::make_shared<detail::WorkState>();
  state->info.name = std::move(name);
  state->info.bytes = bytes;
  state->info.algorithm = state->info.name == "all_reduce" ? algorithm_for(bytes) : backend();
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw Error("communicator is shut down: cannot queue " + state->info.name);
    state->info.communicator = watch_name_;
    state->info.sequence = next_sequence_++;
    queue_.emplace_back(state, std::move(body));
  }
  cv_.notify_one();
  return Work(state);
}

void Communicator::run_queue() {
  for (;;) {
    std::shared_ptr<detail::WorkState> state;
    std::function<void()> body;
    std::shared_ptr<Watchdog> watchdog;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      state = std::move(queue_.front().first);
      body = std::move(queue_.front().second);
      queue_.pop_front();
      // Only what was queued under the watch's name: its sequence is that name's.
      if (!state->info.communicator.empty()) watchdog = watchdog_;
    }
    state->started = std::chrono::steady_clock::now();
    if (watchdog) watchdog->started(this, state);
    std::exception_ptr error;
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    if (watchdog) {
      watchdog->finished(state.get());
      if (error) watchdog->failed(state.get(), error);
    }
    {
      std::lock_guard lock(state->mu);
      state->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - state->started).count();
      state->error = error;
      state->done = true;
    }
    state->done_cv.notify_all();
  }
}

Work Communicator::all_reduce(BufferView buf, ReduceOp op) {
  return enqueue("all_reduce", buf.bytes(), [this, buf, op] { all_reduce_now(buf, op); });
}

Work Communicator::reduce_scatter(BufferView buf, ReduceOp op) {
  return enqueue("reduce_scatter", buf.bytes(), [this, buf, op] { reduce_scatter_now(buf, op); });
}

Work Communicator::all_gather(BufferView buf) {
  return enqueue("all_gather", buf.bytes(), [this, buf] { all_gather_now(buf); });
}

Work Communicator::broadcast(BufferView buf, int root) {
  if (root < 0 || root >= size_)
    throw InvalidArgument("broadcast: root must be in [0, " + std::to_string(size_) + "), got " + std::to_string(root));
  return enqueue("broadcast", buf.bytes(), [this, buf, root] { broadcast_now(buf, root); });
}

Work Communicator::barrier() {
  return enqueue("barrier", 0, [this] { barrier_now(); });
}

}  // namespace torus::comm

#include "worker/comm/watchdog.h"

#include <cstdlib>
#include <future>
#include <sstream>
#include <utility>

#include "common/launch/exit_codes.h"
#include "common/log/log.h"
#include "common/util/main_guard.h"
#include "worker/backend/cuda/cuda_error.h"

namespace torus::comm {
namespace {

// Where a rank publishes its progress on one communicator: each communicator's sequences have their own key.
std::string progress_key(const std::string& communicator, int rank) {
  return "progress/" + communicator + "/" + std::to_string(rank);
}

// Runs comm->abort() on a thread of its own and waits for it `grace` at most; true when it returned. The thread is
// detached: when the abort never returns, it ends with the process, which the caller exits next.
bool abort_within(Communicator* comm, milliseconds grace) {
  auto returned = std::make_shared<std::promise<void>>();
  std::future<void> done = returned->get_future();
  std::thread([comm, returned] {
    comm->abort();
    returned->set_value();
  }).detach();
  return done.wait_for(grace) == std::future_status::ready;
}

}  // namespace

Watchdog::Watchdog(int rank, int world_size, std::shared_ptr<Store> store, TimeoutAction action, milliseconds timeout,
                   milliseconds publish_interval, milliseconds abort_grace)
    : rank_(rank),
      world_size_(world_size),
      store_(std::move(store)),
      action_(action),
      timeout_(timeout),
      publish_interval_(publish_interval),
      abort_grace_(abort_grace),
      thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::started(Communicator* comm, const std::shared_ptr<detail::WorkState>& work) {
  std::lock_guard lock(mu_);
  in_flight_[work.get()] = Entry{comm, work, Clock::now() + timeout_};
  Progress& progress = progress_[work->info.communicator];
  progress.started = std::max(progress.started, work->info.sequence);
  cv_.notify_all();
}

void Watchdog::finished(const detail::WorkState* work) {
  std::lock_guard lock(mu_);
  in_flight_.erase(work);
}

launch::ExitCode failure_exit_code(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const worker::cuda::DeviceFault&) {
    return launch::ExitCode::kFailure;
  } catch (...) {
    return launch::ExitCode::kRetryable;
  }
}

void Watchdog::failed(const detail::WorkState* work, const std::exception_ptr& error) {
  std::string what = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  const std::string report =
      "collective " + describe(work->info) + " failed on rank " + std::to_string(rank_) + ": " + what;
  TLOG(Error) << "watchdog: " << report;
  {
    std::lock_guard lock(mu_);
    reports_.push_back(report);
  }
  if (action_ == TimeoutAction::kExitProcess) {
    const launch::ExitCode code = failure_exit_code(error);
    const std::string reason =
        std::string(code == launch::ExitCode::kFailure ? "DeviceFault: " : "CollectiveFailed: ") + report;
    write_termination_log(reason.c_str());
    say_last_words();
    std::fflush(stderr);
    std::_Exit(to_int(code));
  }
}

void Watchdog::set_last_words(std::function<void()> last_words) {
  std::lock_guard lock(mu_);
  last_words_ = std::move(last_words);
}

void Watchdog::say_last_words() {
  std::function<void()> words;
  {
    std::lock_guard lock(mu_);
    words = last_words_;
  }
  if (words) words();
}

std::string Watchdog::reports() const {
  std::lock_guard lock(mu_);
  std::string all;
  for (const auto& r : reports_) all += r + "\n";
  return all;
}

std::vector<int> Watchdog::ranks_behind(const std::string& communicator, uint64_t sequence) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; ++r) keys.push_back(progress_key(communicator, r));
  std::vector<bool> present = store_->check(keys);
  std::vector<int> behind;
  for (int r = 0; r < world_size_; ++r) {
    uint64_t progress = 0;
    if (present[static_cast<size_t>(r)]) progress = std::stoull(to_string(store_->get(keys[r], milliseconds(1000))));
    if (progress < sequence) behind.push_back(r);
  }
  return behind;
}

std::string Watchdog::where(int rank) {
  const std::string r = std::to_string(rank);
  try {
    const std::vector<bool> known = store_->check({"join/" + r, "host/" + r});
    const std::string node = known[0] ? to_string(store_->get("join/" + r, milliseconds(1000))) : "";
    const std::string host = known[1] ? to_string(store_->get("host/" + r, milliseconds(1000))) : "";
    if (node.empty() && host.empty()) return "";
    // Locally the host is the node; in Kubernetes it is the pod's name.
    if (host.empty() || host == node) return " (node " + node + ")";
    return " (pod " + host + (node.empty() ? "" : ", node " + node) + ")";
  } catch (const std::exception&) {
    return "";  // the report names the rank alone
  }
}

void Watchdog::publish_progress() {
  std::vector<std::pair<std::string, uint64_t>> changed;
  {
    std::lock_guard lock(mu_);
    for (const auto& [communicator, progress] : progress_)
      if (progress.started != progress.published) changed.emplace_back(communicator, progress.started);
  }
  for (const auto& [communicator, sequence] : changed) {
    try {
      store_->set(progress_key(communicator, rank_), to_bytes(std::to_string(sequence)));
      std::lock_guard lock(mu_);
      progress_[communicator].published = sequence;
    } catch (const std::exception& e) {
      TLOG(Warn) << "watchdog: cannot publish progress on " << communicator << " to the store: " << e.what();
    }
  }
}

void Watchdog::fire(const Entry& entry) {
  const CollectiveInfo& info = entry.work->info;
  std::ostringstream report;
  report << "collective " << describe(info) << " on rank " << rank_ << " did not finish within " << timeout_.count()
         << " ms; ";
  try {
    publish_progress();
    std::vector<int> behind = ranks_behind(info.communicator, info.sequence);
    report << "ranks that never arrived: ";
    if (behind.empty()) report << "none (all started it; a peer hung or died inside it)";
    for (size_t i = 0; i < behind.size(); ++i) report << (i ? ", " : "") << behind[i] << where(behind[i]);
  } catch (const std::exception& e) {
    report << "the store cannot tell which ranks are missing (" << e.what() << ")";
  }
  TLOG(Error) << "watchdog: " << report.str();
  {
    std::lock_guard lock(mu_);
    reports_.push_back(report.str());
  }
  if (action_ == TimeoutAction::kExitProcess) abort_and_exit(entry.comm, report.str());
  entry.comm->abort();
}

void Watchdog::abort_and_exit(Communicator* comm, const std::string& report) {
  if (!abort_within(comm, abort_grace_)) {
    TLOG(Error) << "watchdog: the communicator's abort did not return within " << abort_grace_.count()
                << " ms (a kernel queued before it never finished); exiting without it";
  }
  const std::string reason = "CollectiveTimeout: " + report;
  write_termination_log(reason.c_str());
  say_last_words();
  std::fflush(stderr);
  std::_Exit(to_int(launch::ExitCode::kCollectiveTimeout));  // the communication thread is stuck: no orderly unwind
}

void Watchdog::loop() {
  auto next_publish = Clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto wake = next_publish;
    for (const auto& [key, entry] : in_flight_) wake = std::min(wake, entry.deadline);
    cv_.wait_until(lock, wake);
    if (stopping_) break;
    const auto now = Clock::now();
    std::vector<Entry> expired;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(it->second);
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    if (now >= next_publish) {
      publish_progress();
      next_publish = Clock::now() + publish_interval_;
    }
    for (const auto& e : expired) fire(e);
    lock.lock();
  }
}

}  // namespace torus::comm

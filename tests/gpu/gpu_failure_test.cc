// The NCCL communicator's failure paths on one GPU, each ending in bounded time with a typed error or exit code:
// a rank whose peer never comes (creation times out and aborts), a compute kernel still running past the deadline
// of a collective ordered after it (the watch times out, aborts, and the caller gets the Timeout once the abort
// returns), a kernel that outlasts everything inside a step a production watchdog watches (the process exits 43
// whatever the abort does, in a death test), and a kernel fault inside such a step (the process exits with the
// permanent-failure code, in a death test: the CUDA context is dead afterwards). Every test skips without a device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/launch/exit_codes.h"
#include "common/util/error.h"
#include "tests/gpu/fault_kernels.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/comm/nccl/nccl_communicator.h"
#include "worker/comm/store.h"
#include "worker/comm/watchdog.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;
namespace wc = ::torus::worker::cuda;

// Short, so the three tests fit a GPU window; long enough that NCCL's own setup on one host never reaches it.
constexpr milliseconds kShort{2000};
// Longer than any path under test takes: a wait that must not be what ends a test.
constexpr milliseconds kLong{5 * kShort};
// The compute kernel that outlasts kShort by far (and then ends by itself): it stands in for a hung kernel, so the
// Timeout must reach the caller well before it ends.
constexpr milliseconds kSpin{3 * kShort};
// A compute kernel that outlasts the hang guard: a hung kernel, as far as the process can tell.
constexpr milliseconds kHung{4 * kLong};
constexpr size_t kCount = 1024;  // floats per collective: the size does not matter, the ordering does
// What a hang guard exits with; distinct from every ExitCode, so a death test cannot take a hang for the fault.
constexpr int kHungExit = 124;

// A failure path that hangs instead of failing would hold the short GPU window until CTest's timeout. This ends the
// process with a message instead; CTest runs each test in a process of its own, so only the hung test fails.
class HangGuard {
 public:
  HangGuard(milliseconds limit, std::string what)
      : thread_([this, limit, what = std::move(what)] {
          std::unique_lock lock(mu_);
          if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
          std::fprintf(stderr, "gpu_failure_test: %s did not return within %lld ms (hung)\n", what.c_str(),
                       static_cast<long long>(limit.count()));
          std::fflush(stderr);
          std::_Exit(kHungExit);  // a hung NCCL or CUDA call cannot be unwound
        }) {}
  ~HangGuard() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members it waits on exist
};

double seconds(steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string within(milliseconds timeout) { return " did not finish within " + std::to_string(timeout.count()) + " ms"; }

class GpuFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    if (wc::device_count() == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found none, GPU test not run";
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "gpu-failure");
    TcpStoreOptions o;
    o.port = server_->port();
    o.secret = "gpu-failure";
    store_ = std::make_shared<TcpStore>(o);
  }

  // Starts the collective under test on `comm` (ordered after `compute`) and returns its Work.
  using Collective = std::function<Work(NcclCommunicator& comm, BufferView buf, cudaStream_t compute)>;

  // A kernel on the compute stream spins for kSpin; `collective`, ordered after it, cannot finish before kShort, the
  // communicator's timeout. Its watch must give up at the deadline, abort the communicator and fail the Work with a
  // Timeout naming `watch` and the timeout; the spin ends by itself and the device stays usable. The Timeout reaches
  // the caller when the abort returns: ncclCommAbort frees the communicator's device memory, so it may wait for the
  // NCCL kernel queued behind the spin, i.e. for the spin (the time printed says which). Behind a kernel that never
  // ends it would never return: a production rank exits through the watchdog instead, within its grace whatever the
  // abort does (AHungKernelInAWatchedStepExitsWithTheTimeoutCode).
  void expect_timeout_behind_a_spin(const std::string& watch, const Collective& collective) {
    // Declared first, so it also bounds the teardown (the communicator drains its stream: the rest of the spin).
    const HangGuard guard(3 * kLong, "the collective behind a spinning compute kernel");
    auto backend = wc::make_cuda_backend(wc::CudaOptions{});
    const cudaStream_t compute = backend->compute_stream();
    NcclCommunicator comm(0, 1, std::make_shared<PrefixStore>("spin", store_), 0, kShort);
    comm.order_after(compute);
    worker::Buffer grads = backend->allocate(kCount * sizeof(float));
    const BufferView buf{grads.data(), kCount, DType::kF32};
    // NCCL sets itself up on the first collective (kernels loaded, connections made); that is not what must time out.
    collective(comm, buf, compute).wait(kLong);

    CUDA_CHECK(test::launch_spin(compute, kSpin));
    const auto start = steady_clock::now();
    std::string error;
    try {
      collective(comm, buf, compute).wait(kLong);
      ADD_FAILURE() << watch << " finished although the compute stream it waits for was busy for " << kSpin.count()
                    << " ms, past the " << kShort.count() << " ms timeout";
    } catch (const Timeout& e) {
      error = e.what();
    }
    const auto elapsed = steady_clock::now() - start;
    std::printf("%s: Timeout after %.2f s (timeout %.1f s, spin %.1f s): %s\n", watch.c_str(), seconds(elapsed),
                seconds(kShort), seconds(kSpin), error.c_str());
    // The communicator's own watch, not Work::wait's longer deadline ("collective ... within 10000 ms").
    EXPECT_THAT(error, HasSubstr("NCCL " + watch + within(kShort) + " (rank 0 of 1); communicator aborted"));
    EXPECT_GE(elapsed, kShort) << "the watch gave up before its deadline";

    // Aborted on the timeout: what comes next fails at once instead of joining a broken communicator.
    try {
      comm.all_reduce(buf).wait(kLong);
      ADD_FAILURE() << "a collective ran on a communicator aborted after a timeout";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("the communicator was aborted"));
    }
    // The spin was bounded and the abort left the context alone: the compute stream drains without an error.
    CUDA_CHECK(cudaStreamSynchronize(compute));
  }

  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
};

// Rank 0 of a world of 2, and nobody plays rank 1: NCCL's non-blocking init never settles. The constructor must give
// up at its timeout, abort the half-made communicator (ncclCommAbort with its init in flight) and throw a Timeout
// naming the init and the timeout; its cleanup (communication thread stopped, stream drained) must return too, since
// the exception reaches the caller only after it ran.
TEST_F(GpuFailure, ARankWhosePeerNeverComesTimesOutAbortsAndReturns) {
  const HangGuard guard(3 * kLong, "creating a communicator of 2 ranks without rank 1");
  const auto start = steady_clock::now();
  std::string error;
  try {
    NcclCommunicator comm(0, 2, std::make_shared<PrefixStore>("alone", store_), 0, kShort);
    ADD_FAILURE() << "a communicator of 2 ranks came up with rank 1 absent";
  } catch (const Timeout& e) {
    error = e.what();
  }
  const auto elapsed = steady_clock::now() - start;
  std::printf("creation without rank 1: Timeout after %.2f s (timeout %.1f s): %s\n", seconds(elapsed), seconds(kShort),
              error.c_str());
  EXPECT_THAT(error, HasSubstr("NCCL ncclCommInitRankConfig" + within(kShort) + " (rank 0 of 2)"));
  EXPECT_THAT(error, HasSubstr("communicator aborted"));
  EXPECT_GE(elapsed, kShort) << "gave up before its timeout";
  EXPECT_LT(elapsed, 5 * kShort) << "the abort of an init in flight, or the cleanup after it, took too long";
}

// all_reduce() ordered after the compute stream (order_after): the communication thread's wait for it (complete())
// times out while the compute kernel still runs.
TEST_F(GpuFailure, AComputeSpinPastTheTimeoutFailsTheOrderedAllReduceWithATimeout) {
  expect_timeout_behind_a_spin("all_reduce", [](NcclCommunicator& comm, BufferView buf, cudaStream_t /*compute*/) {
    return comm.all_reduce(buf);
  });
}

// The gradient path as NcclGradientSync runs it: the reduction enqueued from the training thread after the compute
// stream, watched on the communication thread by wait_enqueued().
TEST_F(GpuFailure, AComputeSpinPastTheTimeoutFailsTheWatchedGradientStepWithATimeout) {
  expect_timeout_behind_a_spin("gradient step", [](NcclCommunicator& comm, BufferView buf, cudaStream_t compute) {
    comm.enqueue_all_reduce_average(buf, compute);
    return comm.submit("gradient_all_reduce", buf.bytes(), [&comm] { comm.wait_enqueued("gradient step"); });
  });
}

// The child process of the death test below: a gradient step whose compute stream faults, watched by a production
// watchdog (kExitProcess). Returns only if nothing ended the process.
void fault_inside_a_watched_step(const std::shared_ptr<Store>& store) {
  const HangGuard guard(3 * kLong, "the watched step with a faulting kernel");
  auto backend = wc::make_cuda_backend(wc::CudaOptions{});
  const cudaStream_t compute = backend->compute_stream();
  // Deadlines far beyond the fault: a timeout (exit 43) must not be what ends the process.
  auto watchdog = std::make_shared<Watchdog>(0, 1, store, TimeoutAction::kExitProcess, 2 * kLong);
  NcclCommunicator comm(0, 1, std::make_shared<PrefixStore>("fault", store), 0, 2 * kLong);
  comm.set_watchdog(watchdog, "nccl-gradients");  // the name the worker watches its NCCL communicator under
  worker::Buffer grads = backend->allocate(kCount * sizeof(float));
  const BufferView buf{grads.data(), kCount, DType::kF32};
  // NCCL's first collective loads its kernels: done while the context is healthy, so that the fault below reaches
  // the watch, not an NCCL enqueue on this thread.
  comm.all_reduce(buf).wait(kLong);
  // The spin holds the fault back until the step below is enqueued and watched.
  CUDA_CHECK(test::launch_spin(compute, milliseconds(1000)));
  CUDA_CHECK(test::launch_illegal_write(compute));
  comm.enqueue_all_reduce_average(buf, compute);
  comm.submit("gradient_all_reduce", buf.bytes(), [&comm] { comm.wait_enqueued("gradient step"); }).wait(2 * kLong);
}

// The child process of the death test below: a gradient step behind a compute kernel that outlasts the hang guard,
// watched by a production watchdog (kExitProcess, timeout kShort, the abort given kShort). The communicator's own
// watch is later than the guard. Returns only if nothing ended the process.
void hang_inside_a_watched_step(const std::shared_ptr<Store>& store) {
  const HangGuard guard(3 * kLong, "the watched step behind a hung kernel");
  auto backend = wc::make_cuda_backend(wc::CudaOptions{});
  const cudaStream_t compute = backend->compute_stream();
  auto watchdog =
      std::make_shared<Watchdog>(0, 1, store, TimeoutAction::kExitProcess, kShort, milliseconds(200), kShort);
  NcclCommunicator comm(0, 1, std::make_shared<PrefixStore>("hung", store), 0, 4 * kLong);
  comm.set_watchdog(watchdog, "nccl-gradients");
  worker::Buffer grads = backend->allocate(kCount * sizeof(float));
  const BufferView buf{grads.data(), kCount, DType::kF32};
  comm.all_reduce(buf).wait(kLong);  // NCCL's set-up, while nothing hangs
  CUDA_CHECK(test::launch_spin(compute, kHung));
  comm.enqueue_all_reduce_average(buf, compute);
  comm.submit("gradient_all_reduce", buf.bytes(), [&comm] { comm.wait_enqueued("gradient step"); }).wait(4 * kLong);
}

using GpuFailureDeathTest = GpuFailure;

// A step whose kernel hangs: the watchdog reports the step at its timeout and the rank exits 43
// (ExitCode::kCollectiveTimeout, retryable: the gang restarts from its checkpoint) while the kernel still runs, even
// if the communicator's abort waits for that kernel. Without the bounded exit, the hang guard ends it (124).
TEST_F(GpuFailureDeathTest, AHungKernelInAWatchedStepExitsWithTheTimeoutCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(hang_inside_a_watched_step(store_),
              ::testing::ExitedWithCode(launch::to_int(launch::ExitCode::kCollectiveTimeout)),
              "watchdog: collective nccl-gradients gradient_all_reduce #[0-9]+ .*did not finish within 2000 ms");
}

// An illegal address in a kernel is a fault of this rank's own device: CUDA_CHECK in the watch throws
// cuda::DeviceFault, and the watchdog maps exactly that to ExitCode::kFailure (failure_exit_code): permanent, so a
// gang does not restart into the same fault. Any other error would exit 42 (kRetryable) or 43 (kCollectiveTimeout).
// In a child process (the "threadsafe" style re-executes this binary): the CUDA context is dead after the fault.
TEST_F(GpuFailureDeathTest, AnIllegalAddressInAWatchedStepExitsWithThePermanentFailureCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      fault_inside_a_watched_step(store_), ::testing::ExitedWithCode(launch::to_int(launch::ExitCode::kFailure)),
      "watchdog: collective .*gradient_all_reduce #[0-9]+ .*failed on rank 0: CUDA error: .*illegal memory access");
}

}  // namespace
}  // namespace torus::comm

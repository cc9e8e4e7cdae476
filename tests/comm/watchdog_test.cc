// The collective watchdog, ranks as threads: a collective a peer never joins fails on the waiting rank, and the
// report names the collective and the ranks that never arrived. (failure_test.cc: the same with processes that exit.)
#include "worker/comm/watchdog.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <latch>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/backend/cuda/cuda_error.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

TEST(Watchdog, ReportsTheRanksThatNeverArrived) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  auto options = testing::test_options();
  options.timeout = milliseconds(500);
  std::latch done(2);
  testing::run_ranks(2, [&](int rank) {
    auto world = make_world(testing::sim_env(rank, 2, 1, server.port(), testing::test_name()), options);
    if (rank == 0) {
      std::vector<float> v(1000, 1.0f);
      Work w = world->comm().all_reduce(view_of(std::span<float>(v)));
      EXPECT_THROW(w.wait(milliseconds(20000)), Error);
      const std::string report = world->watchdog().reports();
      EXPECT_NE(report.find("all_reduce #1"), std::string::npos) << report;
      EXPECT_NE(report.find("ranks that never arrived: 1"), std::string::npos) << report;
      // Where it runs, as it said when it joined: its node (and, in a pod, the pod's name: its host name).
      const std::string host = own_host_name();
      EXPECT_NE(report.find("ranks that never arrived: 1 (" + (host == "sim-node1" ? "" : "pod " + host + ", ") +
                            "node sim-node1)"),
                std::string::npos)
          << report;
    }
    done.arrive_and_wait();  // rank 1 stays alive (hung, from rank 0's view) until rank 0 has its answer
  });
}

// A communicator whose collectives do nothing and finish at once: a second watched communicator beside the world's
// (as the NCCL gradient path is on a GPU rank), numbering its own collectives.
class InstantCommunicator final : public Communicator {
 public:
  InstantCommunicator(int rank, int size) : Communicator(rank, size, milliseconds(1000)) {}
  ~InstantCommunicator() override { stop_thread(); }
  void all_reduce_now(BufferView, ReduceOp) override {}
  void reduce_scatter_now(BufferView, ReduceOp) override {}
  void all_gather_now(BufferView) override {}
  void broadcast_now(BufferView, int) override {}
  void barrier_now() override {}
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  std::string backend() const override { return "instant"; }
};

// Rank 1 is far ahead on another watched communicator (its gradient reductions) but never arrives at the world's
// all_reduce #1: the report must name it. With one sequence space for both, its progress (3) would pass for having
// started world #1 and the report would say every rank arrived.
TEST(Watchdog, EachCommunicatorsSequencesAreItsOwn) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  auto options = testing::test_options();
  options.timeout = milliseconds(500);
  std::latch rank1_ahead(1);
  std::latch done(2);
  testing::run_ranks(2, [&](int rank) {
    auto world = make_world(testing::sim_env(rank, 2, 1, server.port(), testing::test_name()), options);
    if (rank == 1) {
      InstantCommunicator gradients(rank, 2);
      gradients.set_watchdog(world->shared_watchdog(), "gradients");
      for (int i = 0; i < 3; ++i) gradients.all_reduce(BufferView{nullptr, 0, DType::kF32}).wait(milliseconds(5000));
      EXPECT_EQ(gradients.last_sequence(), 3u);
      // Its progress there is in the store before rank 0 starts (the watchdog publishes a few times a second).
      EXPECT_TRUE(world->store()->wait({"progress/gradients/1"}, milliseconds(5000)).empty());
      rank1_ahead.count_down();
    } else {
      rank1_ahead.wait();
      std::vector<float> v(1000, 1.0f);
      Work w = world->comm().all_reduce(view_of(std::span<float>(v)));
      EXPECT_THROW(w.wait(milliseconds(20000)), Error);
      const std::string report = world->watchdog().reports();
      EXPECT_NE(report.find("collective world all_reduce #1 ("), std::string::npos) << report;
      EXPECT_NE(report.find("ranks that never arrived: 1"), std::string::npos) << report;
      // And the other way round: rank 0 ran no gradient collective, rank 1 published its progress there.
      EXPECT_EQ(world->watchdog().ranks_behind("gradients", 1), std::vector<int>{0});
    }
    done.arrive_and_wait();
  });
}

// A communicator whose collectives never finish on their own. With AbortReturns::kNever its abort never returns
// either: what ncclCommAbort is behind a hung kernel (it frees the communicator's device memory, so it waits for every
// kernel queued before it) or while a captured CUDA graph holds the communicator (TORUS_NCCL_GRAPHS=1). With kAtOnce
// the abort releases the collective and returns, as an abort that works does.
enum class AbortReturns { kNever, kAtOnce };
class HungCommunicator final : public Communicator {
 public:
  explicit HungCommunicator(AbortReturns abort) : Communicator(0, 1, milliseconds(600000)), abort_(abort) {}
  ~HungCommunicator() override { stop_thread(); }
  void all_reduce_now(BufferView, ReduceOp) override { released_.wait(); }
  void reduce_scatter_now(BufferView, ReduceOp) override { released_.wait(); }
  void all_gather_now(BufferView) override { released_.wait(); }
  void broadcast_now(BufferView, int) override { released_.wait(); }
  void barrier_now() override { released_.wait(); }
  std::unique_ptr<Communicator> split(int, int) override { return nullptr; }
  std::string backend() const override { return "hung"; }
  void abort() noexcept override {
    if (abort_ == AbortReturns::kAtOnce) released_.count_down();
    released_.wait();
  }

 private:
  AbortReturns abort_;
  std::latch released_{1};
};

// What the death tests' children exit with when the watchdog never ended them: no ExitCode has it.
constexpr int kHungExit = 124;

// A death test's child: a production watchdog (kExitProcess, timeout 200 ms, the abort given `grace`) over a
// collective that never finishes on its own. Returns only through the hang guard: a Work::wait far longer than the
// timeout and the grace together, after which it exits kHungExit.
void hang_under_a_production_watchdog(AbortReturns abort, milliseconds grace) {
  TcpStoreServer server("127.0.0.1", 0, "test-secret");
  TcpStoreOptions options;
  options.port = server.port();
  options.secret = "test-secret";
  auto watchdog = std::make_shared<Watchdog>(0, 1, std::make_shared<TcpStore>(options), TimeoutAction::kExitProcess,
                                             milliseconds(200), milliseconds(50), grace);
  HungCommunicator comm(abort);
  comm.set_watchdog(watchdog, "hung");
  try {
    comm.all_reduce(BufferView{nullptr, 0, DType::kF32}).wait(milliseconds(60000));
  } catch (const Error&) {
  }
  // An abort that works releases the collective too, so the wait above may return while the watchdog is about to
  // exit: the guard waits on, for the watchdog's exit, rather than racing it.
  std::this_thread::sleep_for(std::chrono::seconds(60));
  std::fprintf(stderr, "hang guard: the watchdog did not end the process\n");
  std::fflush(stderr);
  std::_Exit(kHungExit);  // the communication thread (and with kNever the abort) still hang: no orderly unwind
}

// A rank whose collective timed out exits 43 within the grace even when the abort never returns (ncclCommAbort behind
// a hung kernel): the restart must not wait for a kernel that never ends.
TEST(WatchdogDeathTest, ATimedOutRankExitsWithTheTimeoutCodeEvenWhenItsAbortNeverReturns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(hang_under_a_production_watchdog(AbortReturns::kNever, milliseconds(200)),
              ::testing::ExitedWithCode(launch::to_int(launch::ExitCode::kCollectiveTimeout)),
              "collective hung all_reduce #1 .*did not finish within 200 ms.*abort did not return within 200 ms");
}

// An abort that returns is waited for, and the exit follows it at once, not at the end of the grace (ten minutes
// here, far past the hang guard).
TEST(WatchdogDeathTest, AnAbortThatReturnsIsWaitedForAndTheExitFollowsIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(hang_under_a_production_watchdog(AbortReturns::kAtOnce, milliseconds(600000)),
              ::testing::ExitedWithCode(launch::to_int(launch::ExitCode::kCollectiveTimeout)),
              "collective hung all_reduce #1 .*did not finish within 200 ms");
}

// A fault of this rank's own device (a kernel bug) would fail the restarted gang the same way: permanent. Anything
// else a collective fails with (a peer gone, NCCL's own errors) restarts the gang from its checkpoint.
TEST(Watchdog, ADeviceFaultIsPermanentAPeerFailureRetryable) {
  EXPECT_EQ(failure_exit_code(std::make_exception_ptr(worker::cuda::DeviceFault("CUDA error: illegal address"))),
            launch::ExitCode::kFailure);
  EXPECT_EQ(failure_exit_code(std::make_exception_ptr(worker::cuda::CudaError("NCCL error: remote process exited"))),
            launch::ExitCode::kRetryable);
  EXPECT_EQ(failure_exit_code(std::make_exception_ptr(SystemError("connection reset by peer"))),
            launch::ExitCode::kRetryable);
  // The machine's fault (worker/backend/cuda/error_class.h: an uncorrectable ECC error), seen in a watched step.
  EXPECT_EQ(failure_exit_code(std::make_exception_ptr(HardwareFault("CUDA error: uncorrectable ECC error"))),
            launch::ExitCode::kRetryable);
}

}  // namespace
}  // namespace torus::comm

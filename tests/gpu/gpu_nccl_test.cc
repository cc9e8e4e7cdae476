// The NCCL communicator together with the CUDA backend, as GPU training uses them: gradients written by kernels on
// the backend's compute stream are all-reduced on the communication stream without a host synchronization in
// between (order_after), and the result matches the sum the CPU computes. Ranks are threads, one GPU each (at most
// 4); every test skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run_ranks.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/backend/cuda/graph.h"
#include "worker/comm/nccl/nccl_communicator.h"
#include "worker/comm/nccl/nccl_gradient_sync.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;
namespace wc = ::torus::worker::cuda;

constexpr milliseconds kTimeout{60000};

using ::torus::test::run_ranks;

// Rank r's backend, on GPU r (one rank per device, as NCCL requires).
std::unique_ptr<wc::CudaBackend> backend_on(int rank) {
  wc::CudaOptions o;
  o.device = rank;
  return wc::make_cuda_backend(o);
}

class GpuNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    gpus_ = ::torus::worker::cuda::device_count();
    if (gpus_ == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found none, GPU test not run";
    ranks_ = std::min(gpus_, 4);
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, "gpu-nccl");
    TcpStoreOptions o;
    o.port = server_->port();
    o.secret = "gpu-nccl";
    store_ = std::make_shared<TcpStore>(o);
  }
  int gpus_ = 0, ranks_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
};

TEST_F(GpuNccl, GradientsFromTheComputeStreamAreReducedWithoutAHostWait) {
  const size_t count = size_t{16} << 20;  // 64 MiB: the fill kernels are still running when NCCL is enqueued
  run_ranks(ranks_, [&](int rank) {
    auto backend = backend_on(rank);
    NcclCommunicator comm(rank, ranks_, std::make_shared<PrefixStore>("grads", store_), rank, kTimeout);
    comm.order_after(backend->compute_stream());
    worker::Buffer grads = backend->allocate(count * sizeof(float));
    const worker::Tensor g(grads.data(), {static_cast<int64_t>(count)});
    for (int step = 1; step <= 3; ++step) {
      backend->fill(g, static_cast<float>(step * (rank + 1)));  // queued on the compute stream, not waited for
      comm.all_reduce(BufferView{grads.data(), count, DType::kF32}).wait(kTimeout);
      std::vector<float> host(count);
      backend->download(g, host.data());
      const float want = static_cast<float>(step * ranks_ * (ranks_ + 1) / 2);
      const auto bad = std::count_if(host.begin(), host.end(), [&](float v) { return v != want; });
      ASSERT_EQ(bad, 0) << "rank " << rank << " step " << step << ": " << bad << " elements differ from " << want;
    }
  });
}

// The gradient path's metrics: every bucket of every step counted once, with its bytes and a device time from the
// events around its reduction (after its arrival gate); and the reduction itself right (the average of the ranks'
// gradients).
TEST_F(GpuNccl, GradientSyncAveragesAndCountsEachBucketsBytesAndDeviceTime) {
  const std::vector<ParamSpan> spans = {{0, 1 << 18}, {1 << 18, 1 << 16}, {(1 << 18) + (1 << 16), 1000}};
  const size_t count = spans.back().offset + spans.back().count;
  constexpr int kSteps = 3;
  run_ranks(ranks_, [&](int rank) {
    auto backend = backend_on(rank);
    worker::Buffer grads = backend->allocate(count * sizeof(float));
    const worker::Tensor g(grads.data(), {static_cast<int64_t>(count)});
    auto traffic = std::make_shared<TrafficCounter>();
    BucketOptions small;
    small.first_bucket_bytes = 64 << 10;
    small.bucket_cap_bytes = 512 << 10;
    NcclGradientSync sync(std::make_unique<NcclCommunicator>(
                              rank, ranks_, std::make_shared<PrefixStore>("traffic", store_), rank, kTimeout),
                          backend->compute_stream(), g.f32(), count, spans, small, traffic);
    for (int step = 0; step < kSteps; ++step) {
      sync.begin_step();
      backend->fill(g, static_cast<float>(rank + 1));
      for (size_t p = spans.size(); p-- > 0;) sync.grad_ready(p);
      sync.finish_step();
    }
    sync.drain();
    std::vector<float> host(count);
    backend->download(g, host.data());
    const float want = static_cast<float>(ranks_ + 1) / 2.0f;
    const auto bad = std::count_if(host.begin(), host.end(), [&](float v) { return std::abs(v - want) > 1e-6f; });
    EXPECT_EQ(bad, 0) << "rank " << rank << ": elements differ from the average " << want;
    const LevelStats t = traffic->totals();
    EXPECT_GT(sync.buckets().size(), 1u);
    EXPECT_EQ(t.calls, kSteps * sync.buckets().size()) << "rank " << rank;
    EXPECT_EQ(t.bytes, kSteps * count * sizeof(float)) << "rank " << rank;
    EXPECT_GT(t.seconds, 0.0) << "rank " << rank;
    EXPECT_LT(t.seconds, 60.0) << "rank " << rank;
  });
}

// A step captured as a CUDA Graph with its reductions inside (GraphCapture::kOn, TORUS_NCCL_GRAPHS=1): the
// communicator's stream joins the capture and is joined back, and every replay reduces again: each rank's
// accumulator gains the average once per executed step (the eager one and 3 replays; the capture runs nothing).
// Each replay is watched (replayed()), and only the eager step is timed (a graph's events are re-recorded by every
// replay). With one GPU the world is one rank: the capture and its watch are shown, the exchange is not.
TEST_F(GpuNccl, ACapturedStepReplaysItsReductionsAndEachReplayIsWatched) {
  const std::vector<ParamSpan> spans = {{0, 1 << 16}, {1 << 16, 4096}};
  const size_t count = spans.back().offset + spans.back().count;
  constexpr int kReplays = 3;
  run_ranks(ranks_, [&](int rank) {
    auto backend = backend_on(rank);
    worker::Buffer grads = backend->allocate(count * sizeof(float)), src = backend->allocate(count * sizeof(float)),
                   acc = backend->allocate(count * sizeof(float));
    const worker::Tensor g(grads.data(), {static_cast<int64_t>(count)}), s(src.data(), g.shape()),
        a(acc.data(), g.shape());
    backend->fill(s, static_cast<float>(rank + 1));
    backend->fill(a, 0.0f);
    auto traffic = std::make_shared<TrafficCounter>();
    BucketOptions small;
    small.first_bucket_bytes = 64 << 10;
    NcclGradientSync sync(std::make_unique<NcclCommunicator>(
                              rank, ranks_, std::make_shared<PrefixStore>("graphs", store_), rank, kTimeout),
                          backend->compute_stream(), g.f32(), count, spans, small, traffic, GraphCapture::kOn);
    ASSERT_TRUE(sync.capturable());
    auto step = [&] {
      sync.begin_step();
      backend->copy(s, g);  // the backward's gradients
      for (size_t p = spans.size(); p-- > 0;) sync.grad_ready(p);
      sync.finish_step();
      backend->add(a, g, a, worker::Activation::kNone);  // the update reads the averages
    };
    step();  // eager: plans and buffers, as the trainer's first step of an epoch
    wc::StepGraph graph = wc::StepGraph::capture(*backend, step);
    for (int i = 0; i < kReplays; ++i) {
      graph.replay(backend->compute_stream());
      sync.replayed();
    }
    sync.drain();
    std::vector<float> host(count);
    backend->download(a, host.data());
    const float want = static_cast<float>(1 + kReplays) * static_cast<float>(ranks_ + 1) / 2.0f;
    const auto bad = std::count_if(host.begin(), host.end(), [&](float v) { return std::abs(v - want) > 1e-5f; });
    EXPECT_EQ(bad, 0) << "rank " << rank << ": the accumulator differs from " << want << " (" << host[0] << ")";
    EXPECT_EQ(traffic->totals().calls, sync.buckets().size()) << "only the eager step is timed";
  });
}

// A straggler's lateness is not transfer time: the last rank enqueues each step's buckets kStraggle late (its host
// is slow), so the others' reduction kernels wait for it on the device. Their device time counts from the arrival
// gate on, so it stays far below the lateness (events around the reduction alone would read at least kStraggle per
// step, and the bus bandwidth that much too low). Needs two GPUs: NCCL takes one rank per device.
TEST_F(GpuNccl, DeviceTimeLeavesOutTheWaitForALatePeer) {
  if (ranks_ < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << gpus_ << ": a late peer needs a second rank";
  constexpr auto kStraggle = milliseconds(300);
  constexpr int kSteps = 2;
  const std::vector<ParamSpan> spans = {{0, 1 << 18}, {1 << 18, 1 << 16}};
  const size_t count = spans.back().offset + spans.back().count;
  run_ranks(ranks_, [&](int rank) {
    auto backend = backend_on(rank);
    worker::Buffer grads = backend->allocate(count * sizeof(float));
    const worker::Tensor g(grads.data(), {static_cast<int64_t>(count)});
    auto traffic = std::make_shared<TrafficCounter>();
    NcclGradientSync sync(
        std::make_unique<NcclCommunicator>(rank, ranks_, std::make_shared<PrefixStore>("late", store_), rank, kTimeout),
        backend->compute_stream(), g.f32(), count, spans, BucketOptions{}, traffic);
    auto step = [&](milliseconds late) {
      sync.begin_step();
      backend->fill(g, 1.0f);
      std::this_thread::sleep_for(late);  // the stimulus: a slow host, not a wait for a condition
      for (size_t p = spans.size(); p-- > 0;) sync.grad_ready(p);
      sync.finish_step();
      sync.drain();
    };
    step(milliseconds(0));  // NCCL connects on its first collective: not part of what is measured
    const double before = traffic->totals().seconds;
    for (int i = 0; i < kSteps; ++i) step(rank == ranks_ - 1 ? kStraggle : milliseconds(0));
    const double seconds = traffic->totals().seconds - before;
    EXPECT_GT(seconds, 0.0) << "rank " << rank;
    EXPECT_LT(seconds, 0.25 * kSteps * std::chrono::duration<double>(kStraggle).count())
        << "rank " << rank << ": the device time of " << kSteps << " steps counts the wait for rank " << ranks_ - 1
        << ", " << kStraggle.count() << " ms late each step";
  });
}

// The watch of enqueued collectives runs on the communication thread, which starts on device 0: it must bind the
// rank's device before its CUDA calls, or ranks above 0 would create a context on GPU 0.
TEST_F(GpuNccl, CommunicationThreadWorksOnTheRanksDevice) {
  if (ranks_ < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << gpus_ << ": with one, every rank uses device 0";
  run_ranks(ranks_, [&](int rank) {
    NcclCommunicator comm(rank, ranks_, std::make_shared<PrefixStore>("device", store_), rank, kTimeout);
    int current = -1;
    comm.submit("device check", 0,
                [&comm, &current] {
                  comm.wait_enqueued("device check");
                  CUDA_CHECK(cudaGetDevice(&current));
                })
        .wait(kTimeout);
    EXPECT_EQ(current, rank) << "the communication thread's current device after wait_enqueued()";
  });
}

TEST_F(GpuNccl, CommunicationStreamRunsAtTheHighestPriorityLikeCompute) {
  run_ranks(1, [&](int rank) {
    auto backend = backend_on(rank);
    NcclCommunicator comm(rank, 1, std::make_shared<PrefixStore>("priority", store_), rank, kTimeout);
    int least = 0, greatest = 0, compute = 0, nccl = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamGetPriority(backend->compute_stream(), &compute));
    CUDA_CHECK(cudaStreamGetPriority(comm.stream(), &nccl));
    EXPECT_EQ(compute, greatest);
    EXPECT_EQ(nccl, greatest) << "priorities run from " << least << " (least) to " << greatest;
  });
}

TEST_F(GpuNccl, AbortedCommunicatorFailsItsCollectivesWithAClearError) {
  run_ranks(ranks_, [&](int rank) {
    NcclCommunicator comm(rank, ranks_, std::make_shared<PrefixStore>("abort", store_), rank, kTimeout);
    comm.barrier().wait(kTimeout);
    comm.abort();
    float* word = nullptr;
    CUDA_CHECK(cudaSetDevice(rank));
    CUDA_CHECK(cudaMalloc(&word, sizeof(float)));
    try {
      comm.all_reduce(BufferView{word, 1, DType::kF32}).wait(kTimeout);
      ADD_FAILURE() << "rank " << rank << ": an aborted communicator ran a collective";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
    }
    CUDA_CHECK(cudaFree(word));
  });
}

}  // namespace
}  // namespace torus::comm

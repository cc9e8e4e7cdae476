// The NCCL communicator on real GPUs; skipped without one. Ranks are threads, one GPU each (one rank per GPU found,
// at most 4), over a shared store.
#include <gtest/gtest.h>

#include <vector>

#include "tests/comm/comm_test_util.h"
#include "worker/backend/cuda/errors.h"
#include "worker/comm/nccl/nccl_communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;

TEST(Nccl, AllReduceBroadcastAndSplitOnEveryGpu) {
  const int gpus = worker::cuda::device_count();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device: the NCCL communicator needs one";
  const int n = std::min(gpus, 4);
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = "k";
  auto base = std::make_shared<TcpStore>(o);
  testing::run_ranks(n, [&](int rank) {
    NcclCommunicator comm(rank, n, std::make_shared<PrefixStore>("nccl-test", base), rank, milliseconds(30000));
    for (size_t count : {size_t{1}, size_t{13}, size_t{1} << 20}) {
      std::vector<float> host(count, static_cast<float>(rank + 1));
      float* dev = nullptr;
      CUDA_CHECK(cudaSetDevice(rank));
      CUDA_CHECK(cudaMalloc(&dev, count * sizeof(float)));
      CUDA_CHECK(cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
      comm.all_reduce(BufferView{dev, count, DType::kF32}).wait(milliseconds(30000));
      CUDA_CHECK(cudaMemcpy(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost));
      for (float x : host) ASSERT_EQ(x, static_cast<float>(n * (n + 1) / 2));
      comm.reduce_scatter(BufferView{dev, count, DType::kF32}).wait(milliseconds(30000));
      comm.all_gather(BufferView{dev, count, DType::kF32}).wait(milliseconds(30000));
      CUDA_CHECK(cudaMemcpy(host.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost));
      for (float x : host) ASSERT_EQ(x, static_cast<float>(n * n * (n + 1) / 2));
      CUDA_CHECK(cudaFree(dev));
    }
    comm.barrier().wait(milliseconds(30000));
    auto sub = comm.split(rank % 2, rank);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), (n - rank % 2 + 1) / 2);
  });
}

}  // namespace
}  // namespace torus::comm

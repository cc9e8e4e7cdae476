// Data-parallel training on GPUs the way torus-worker runs it: two ranks (threads, one GPU each: NCCL refuses two
// ranks on one device) train a small ResNet-9 through TrainStep with NcclGradientSync (bucketed ncclAvg on the
// communicator's stream, ordered with events, no host wait in the step). Both ranks must end with identical
// parameters, equal within fp32 tolerance to one GPU that averages the two ranks' gradients itself. (Not one GPU on the
// concatenated batch: batch norm normalizes each rank's half with that half's statistics, so the gradients differ.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_training.h"
#include "tests/support/run_ranks.h"
#include "worker/app/train_adapters.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/comm/nccl/nccl_gradient_sync.h"
#include "worker/comm/store.h"
#include "worker/nn/model.h"
#include "worker/train/step.h"

namespace torus::worker::train {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTimeout{60000};
constexpr int kRanks = 2;
constexpr int64_t kPerRank = 16, kSize = 16, kClasses = 10;
constexpr int kSteps = 4;
constexpr float kLr = 0.05f;

nn::ModelConfig model_config() { return testing::small_resnet9(kPerRank, kSize, kClasses); }

// Deterministic algorithms too: the ranks and the reference must compute the same gradients.
auto backend_on(int device) { return testing::exact_fp32_backend(device, cuda::Determinism::kRequired); }

// The global batch: rank r's images and labels are rows [r * kPerRank, (r + 1) * kPerRank).
struct GlobalBatch {
  std::vector<float> images;    // (kRanks * kPerRank, kSize, kSize, 1)
  std::vector<int32_t> labels;  // (kRanks * kPerRank)
  GlobalBatch() {
    std::mt19937_64 rng(27);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    images.resize(static_cast<size_t>(kRanks * kPerRank * kSize * kSize));
    for (float& v : images) v = normal(rng);
    for (int64_t i = 0; i < kRanks * kPerRank; ++i) labels.push_back(static_cast<int32_t>((i * 7) % kClasses));
  }
};

// One rank's share of the batch in backend memory.
struct Shard {
  Buffer x_buf, y_buf;
  Tensor x, y;
  Shard(Backend& b, const GlobalBatch& g, int rank) {
    x_buf = b.allocate(static_cast<size_t>(kPerRank * kSize * kSize) * sizeof(float));
    y_buf = b.allocate(static_cast<size_t>(kPerRank) * sizeof(int32_t));
    x = x_buf.view({kPerRank, kSize, kSize, 1});  // (N, H, W, C)
    y = y_buf.view({kPerRank}, DType::kI32);      // (N)
    b.upload(g.images.data() + rank * kPerRank * kSize * kSize, x);
    b.upload(g.labels.data() + rank * kPerRank, y);
  }
};

void run_ranks(const std::function<void(int)>& fn) { ::torus::test::run_ranks(kRanks, fn); }

TEST(GpuDataParallel, TwoRanksWithNcclGradientsMatchOneGpuAveragingBothHalves) {
  const int gpus = ::torus::worker::cuda::device_count();
  if (gpus < kRanks)
    GTEST_SKIP() << "needs 2 CUDA devices (NCCL allows one rank per device), found " << gpus
                 << ": data-parallel GPU test not run";
  const GlobalBatch batch;
  comm::TcpStoreServer server("127.0.0.1", 0, "gpu-dp");
  comm::TcpStoreOptions so;
  so.port = server.port();
  so.secret = "gpu-dp";
  auto store = std::make_shared<comm::TcpStore>(so);

  std::vector<std::vector<float>> params(kRanks);
  std::vector<size_t> buckets(kRanks);
  run_ranks([&](int rank) {
    auto backend = backend_on(rank);
    nn::Model model(*backend, model_config());
    const Arena& grads = model.context().grads;
    std::vector<comm::ParamSpan> spans;
    for (const ArenaEntry& e : grads.entries()) spans.push_back({e.offset, e.elements});
    comm::BucketOptions small;  // several buckets even for this small net: exercise the overlap with backward
    small.first_bucket_bytes = 16 << 10;
    small.bucket_cap_bytes = 64 << 10;
    auto nccl = std::make_unique<comm::NcclCommunicator>(rank, kRanks, std::make_shared<comm::PrefixStore>("dp", store),
                                                         rank, kTimeout, "nccl/gradients/id");
    const Tensor all = grads.all();
    comm::NcclGradientSync sync(std::move(nccl), backend->compute_stream(), all.f32(), static_cast<size_t>(all.numel()),
                                std::move(spans), small);
    buckets[static_cast<size_t>(rank)] = sync.buckets().size();
    worker::app::GradientSyncOf<comm::NcclGradientSync> hooks(sync);
    TrainStep step(model, optim::SgdConfig{}, 0.1f, &hooks);
    Shard shard(*backend, batch, rank);
    for (int s = 0; s < kSteps; ++s) {
      const double loss = step.run(shard.x, shard.y, kLr);
      ASSERT_TRUE(std::isfinite(loss)) << "rank " << rank << " step " << s;
    }
    sync.drain();
    params[static_cast<size_t>(rank)] = nn::export_plain(model.context(), model.context().params);
  });
  EXPECT_GT(buckets[0], 1u);
  ASSERT_FALSE(params[0].empty());
  EXPECT_EQ(params[0], params[1]) << "the ranks' parameters diverged";

  // The reference: one GPU computes both halves' gradients, averages them on the host and takes the same SGD step.
  auto backend = backend_on(0);
  nn::Model model(*backend, model_config());
  optim::Sgd sgd(*backend, model.context().params, optim::SgdConfig{});
  Shard halves[kRanks] = {Shard(*backend, batch, 0), Shard(*backend, batch, 1)};
  Buffer dz_buf = backend->allocate(static_cast<size_t>(kPerRank * kClasses) * sizeof(float));
  const Tensor dz = dz_buf.view({kPerRank, kClasses});
  const Tensor g = model.context().grads.all();
  std::vector<float> sum(static_cast<size_t>(g.numel())), half(sum.size());
  for (int s = 0; s < kSteps; ++s) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (const Shard& h : halves) {
      Tensor logits = model.forward(h.x, Mode::kTrain);
      backend->softmax_cross_entropy(logits, h.y, 0.1f, dz);
      model.backward(dz);
      backend->download(g, half.data());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += half[i];
    }
    for (float& v : sum) v /= static_cast<float>(kRanks);
    backend->upload(sum.data(), g);
    sgd.step(model.context().params, model.context().grads, kLr);
  }
  const std::vector<float> want = nn::export_plain(model.context(), model.context().params);
  ASSERT_EQ(want.size(), params[0].size());
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(v));
  size_t bad = 0;
  float worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float d = std::abs(params[0][i] - want[i]);
    worst = std::max(worst, d);
    if (d > 2e-5f * scale) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "parameters off the one-GPU reference by up to " << worst << " (largest magnitude " << scale
                     << ")";
}

}  // namespace
}  // namespace torus::worker::train

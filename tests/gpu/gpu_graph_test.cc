// CUDA Graph capture (graph.h) and batch staging (staging.h) on the CUDA backend: a captured step replays the same
// work, refuses to allocate, keeps buffers that grow after the capture, and waits for staged batches through events
// that become graph nodes. Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_support.h"
#include "worker/backend/cuda/graph.h"
#include "worker/backend/cuda/staging.h"

namespace torus::worker::cuda {
namespace {

TEST_F(GpuTest, CapturedStepReplaysTheSameWork) {
  const Shape s{1024};
  Held a = make_from(*gpu_, s, random_vector(1024, 25)), b = make_from(*gpu_, s, random_vector(1024, 26));
  Held y = make(*gpu_, s);
  gpu_->synchronize();
  StepGraph graph = StepGraph::capture(*gpu_, [&] { gpu_->add(a.t, b.t, y.t, Activation::kRelu); });
  gpu_->fill(y.t, -5.0f);
  graph.replay(gpu_->compute_stream());
  std::vector<float> want(1024);
  const auto av = fetch(*gpu_, a.t), bv = fetch(*gpu_, b.t);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0f, av[i] + bv[i]);
  expect_close(fetch(*gpu_, y.t), want, 1e-7, "graph replay");
}

TEST_F(GpuTest, AllocatingInsideACaptureIsAClearErrorAndLeavesTheStreamUsable) {
  try {
    (void)StepGraph::capture(*gpu_, [&] { (void)gpu_->allocate(1024); });
    FAIL() << "expected allocate() inside a capture to be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("inside a CUDA Graph capture"), std::string::npos) << e.what();
  }
  Held a = make_from(*gpu_, {4}, {1, 2, 3, 4});
  expect_close(fetch(*gpu_, a.t), {1, 2, 3, 4}, 0.0, "a copy after the failed capture");
}

TEST_F(GpuTest, StagedBatchesArriveInOrderOnTheComputeStream) {
  BatchStager stager(*gpu_, 256 * sizeof(float), 16 * sizeof(int32_t));
  for (int batch = 0; batch < 5; ++batch) {
    std::vector<float> images(256, static_cast<float>(batch));
    std::vector<int32_t> labels(16, batch);
    const int slot =
        stager.stage(images.data(), images.size() * sizeof(float), labels.data(), labels.size() * sizeof(int32_t));
    auto [dev_images, dev_labels] = stager.acquire(slot);
    std::vector<float> got(256);
    gpu_->download(Tensor(dev_images, {256}), got.data());
    std::vector<int32_t> got_labels(16);
    gpu_->download(Tensor(dev_labels, {16}, DType::kI32), got_labels.data());
    stager.release(slot);
    EXPECT_EQ(got, images) << "batch " << batch;
    EXPECT_EQ(got_labels, labels) << "batch " << batch;
  }
}

// A scratch buffer that grows after a capture (a larger batch run eagerly) stays with the graph: its old block must
// not go back to the pool, where a later allocation of its size would get it and every replay would overwrite it.
TEST_F(GpuTest, ScratchThatGrowsAfterACaptureStaysWithTheGraph) {
  const LinearGeometry small{4, 64, 8}, large{64, 64, 8};
  // bf16 input and output: the linear layer converts both through scratch slots around its fp32 GEMM.
  Held x = make_from(*gpu_, {4, 64}, random_vector(256, 40), DType::kBF16);
  Held w = make_from(*gpu_, {8, 64}, random_vector(512, 41)), b = make_from(*gpu_, {8}, random_vector(8, 42));
  Held y = make(*gpu_, {4, 8}, DType::kBF16);
  gpu_->linear_forward(small, x.t, w.t, b.t, y.t);  // the eager warm-up creates the scratch at the small size
  const std::vector<float> want = fetch(*gpu_, y.t);
  StepGraph graph = StepGraph::capture(*gpu_, [&] { gpu_->linear_forward(small, x.t, w.t, b.t, y.t); });
  Held xl = make_from(*gpu_, {64, 64}, random_vector(4096, 43), DType::kBF16);
  Held yl = make(*gpu_, {64, 8}, DType::kBF16);
  gpu_->linear_forward(large, xl.t, w.t, b.t, yl.t);  // grows the scratch slots
  EXPECT_GT(gpu_->graph_retained_bytes(), 0u);
  // Enough blocks of the old scratch sizes (fp32 (4, 64) and (4, 8)) to take every cached one of them.
  std::vector<Held> others;
  for (int i = 0; i < 8; ++i) {
    others.push_back(make(*gpu_, {4, 64}));
    others.push_back(make(*gpu_, {4, 8}));
  }
  for (const Held& h : others) gpu_->fill(h.t, 7.0f);
  gpu_->fill(y.t, 0.0f);
  graph.replay(gpu_->compute_stream());
  expect_close(fetch(*gpu_, y.t), want, 0.0, "the replayed output");
  for (size_t i = 0; i < others.size(); ++i)
    expect_close(fetch(*gpu_, others[i].t), std::vector<float>(static_cast<size_t>(others[i].t.numel()), 7.0f), 0.0,
                 "block " + std::to_string(i) + " allocated after the growth, during a replay");
}

// The backend records and waits for events inside a capture with the external flags: each replay waits for its
// slot's upload and marks the slot consumed, so batches staged between replays arrive in order.
TEST_F(GpuTest, CapturedStepWaitsForTheBatchStagedBeforeEachReplay) {
  BatchStager stager(*gpu_, 256 * sizeof(float), 16 * sizeof(int32_t));
  Held out = make(*gpu_, {256});
  const std::vector<int32_t> labels(16, 0);
  auto stage = [&](float value) {
    const std::vector<float> images(256, value);
    return stager.stage(images.data(), images.size() * sizeof(float), labels.data(), labels.size() * sizeof(int32_t));
  };
  auto step = [&] {  // always slot 0: a graph reads fixed addresses
    auto [images, unused_labels] = stager.acquire(0);
    gpu_->copy(Tensor(images, {256}), out.t);
    stager.release(0);
  };
  ASSERT_EQ(stage(1.0f), 0);
  step();  // the eager warm-up
  expect_close(fetch(*gpu_, out.t), std::vector<float>(256, 1.0f), 0.0, "the eager step");
  StepGraph graph = StepGraph::capture(*gpu_, step);
  for (int round = 2; round <= 4; ++round) {
    ASSERT_EQ(stage(-1.0f), 1);  // the other slot: the graph never reads it
    ASSERT_EQ(stage(static_cast<float>(round)), 0);
    graph.replay(gpu_->compute_stream());
    expect_close(fetch(*gpu_, out.t), std::vector<float>(256, static_cast<float>(round)), 0.0,
                 "replay " + std::to_string(round));
  }
}

// A captured step's host code runs once, at capture; its async loss's labels are still checked after each replay
// (at the next synchronize()), and a bad batch replayed before a good one is not forgotten.
TEST_F(GpuTest, ReplayedStepsReportAnOutOfRangeLabelAtTheNextSynchronize) {
  Held zs = make_from(*gpu_, {2, 3}, random_vector(6, 27)), ls = make(*gpu_, {2}, DType::kI32), loss = make(*gpu_, {1});
  const std::vector<int32_t> good = {0, 2}, bad = {1, 3};
  gpu_->upload(good.data(), ls.t);
  auto step = [&] { gpu_->softmax_cross_entropy_async(zs.t, ls.t, 0.0f, Tensor(), loss.t); };
  step();  // eager first: the per-row loss buffer exists before the capture
  gpu_->synchronize();
  std::unique_ptr<CapturedStep> captured = gpu_->capture_step(step);
  captured->replay();
  EXPECT_NO_THROW(gpu_->synchronize()) << "valid labels";
  gpu_->upload(bad.data(), ls.t);
  captured->replay();
  gpu_->upload(good.data(), ls.t);
  captured->replay();
  try {
    gpu_->synchronize();
    FAIL() << "expected the replayed bad batch's label error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sample 1 of a recent batch"), std::string::npos) << e.what();
  }
  captured->replay();
  EXPECT_NO_THROW(gpu_->synchronize()) << "reported once";
}

}  // namespace
}  // namespace torus::worker::cuda

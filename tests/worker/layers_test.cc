// Every layer's backward against central finite differences of L = sum(y * r) for a random r.
#include "worker/nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <utility>

#include "common/util/error.h"
#include "tests/worker/pretend_device_backend.h"
#include "tests/worker/recording_backend.h"
#include "tests/worker/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/nn/model.h"

namespace torus::worker::nn {
namespace {

using testing::dot;
using testing::random_vector;

class LayerGradTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = cpu::make_cpu_backend(1);
    ctx_ = std::make_unique<Context>(*backend_);
  }

  // After layers are built: allocate arenas and initialize.
  void allocate(Module& m, uint64_t seed = 7) {
    auto alloc = [this](size_t bytes) { return backend_->allocate(bytes); };
    ctx_->params.allocate(alloc);
    ctx_->stats.allocate(alloc);
    ctx_->grads = ctx_->params.mirror(alloc);
    m.init(seed);
  }

  double loss(Module& m, Tensor x, const std::vector<float>& r) {
    Tensor y = m.forward(x);
    EXPECT_EQ(static_cast<size_t>(y.numel()), r.size());
    return dot(y.f32(), r.data(), y.numel());
  }

  // Checks d loss / d v[i] for sampled i against the analytic gradient g. A ReLU (or a max) whose input lies within
  // h of its kink makes the central difference average two slopes: where it disagrees, the one-sided differences
  // tell a kink (they disagree with each other) from a wrong gradient, and the analytic value must then match the
  // side without the kink. Which weights sit near a kink depends on the native weight layout oneDNN picks for the
  // machine's ISA (the sampled index is a position in that layout), so a few kinks are allowed, never most samples.
  void check(const char* what, float* v, const float* g, int64_t n, const std::function<double()>& f, int samples = 24,
             double h = 1e-2, double tol = 2e-2) {
    std::mt19937 rng(3);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    int checked = 0, kinks = 0;
    for (int s = 0; s < samples; ++s) {
      const int64_t i = samples >= n ? s % n : pick(rng);
      const float saved = v[i];
      v[i] = saved + static_cast<float>(h);
      const double up = f();
      v[i] = saved - static_cast<float>(h);
      const double down = f();
      v[i] = saved;
      const double numeric = (up - down) / (2 * h);
      const auto close = [&](double a, double b) { return std::abs(a - b) <= tol * std::max(1.0, std::abs(b)); };
      ++checked;
      if (close(g[i], numeric)) continue;
      const double mid = f();
      const double forward = (up - mid) / h, backward = (mid - down) / h;
      if (!close(forward, backward) && (close(g[i], forward) || close(g[i], backward))) {
        ++kinks;
        continue;
      }
      ADD_FAILURE() << what << " element " << i << ": analytic " << g[i] << ", central difference " << numeric
                    << " (one-sided " << forward << " and " << backward << ")";
    }
    EXPECT_GT(checked, 0);
    EXPECT_LE(kinks, samples / 4) << what << ": too many samples at a kink to check the gradient";
  }

  // Full check of a module on input shape `shape`: input gradient and every parameter gradient.
  void check_module(Module& m, Shape shape, double h = 1e-2, double tol = 2e-2) {
    auto xv = random_vector(static_cast<size_t>(shape.numel()), 11);
    Tensor x(xv.data(), shape);
    Tensor y = m.forward(x);
    auto r = random_vector(static_cast<size_t>(y.numel()), 13);
    std::vector<float> rv = r;
    Tensor dx = m.backward(Tensor(rv.data(), y.shape()));
    std::vector<float> dxv(dx.f32(), dx.f32() + dx.numel());
    std::vector<std::vector<float>> dparams;
    for (size_t i = 0; i < ctx_->params.size(); ++i) {
      Tensor g = ctx_->grad(i);
      dparams.emplace_back(g.f32(), g.f32() + g.numel());
    }
    auto f = [&] { return loss(m, x, r); };
    check("input", xv.data(), dxv.data(), x.numel(), f, 24, h, tol);
    for (size_t i = 0; i < ctx_->params.size(); ++i) {
      Tensor p = ctx_->param(i);
      check(ctx_->params.entry(i).name.c_str(), p.f32(), dparams[i].data(), p.numel(), f, 16, h, tol);
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Context> ctx_;
};

TEST_F(LayerGradTest, Conv3x3Stride1) {
  Conv2d conv(*ctx_, "c", 3, 5, 3, 1, 1, {2, 6, 6});
  allocate(conv);
  check_module(conv, {2, 6, 6, 3});
}

TEST_F(LayerGradTest, Conv1x1Stride2AndOtherBatchSize) {
  // Laid out for batch 4 at 8x8, run at batch 2 at 7x7: the layout must still be right.
  Conv2d conv(*ctx_, "c", 4, 16, 1, 2, 0, {4, 8, 8});
  allocate(conv);
  check_module(conv, {2, 7, 7, 4});
}

TEST_F(LayerGradTest, Conv7x7Stride2Stem) {
  Conv2d conv(*ctx_, "c", 3, 8, 7, 2, 3, {2, 10, 10});
  allocate(conv);
  check_module(conv, {2, 10, 10, 3});
}

TEST_F(LayerGradTest, BatchNormTraining) {
  BatchNorm2d bn(*ctx_, "bn", 4, Activation::kNone, GammaInit::kOne);
  allocate(bn);
  check_module(bn, {3, 3, 3, 4}, 1e-2, 3e-2);
}

TEST_F(LayerGradTest, BatchNormWithFusedRelu) {
  BatchNorm2d bn(*ctx_, "bn", 4, Activation::kRelu, GammaInit::kOne);
  allocate(bn);
  check_module(bn, {3, 3, 3, 4}, 1e-3, 5e-2);
}

// NormThen::kMaxPool2x2 on the CPU runs the fused op in training (Backend::has_norm_max_pool): its gradients against
// finite differences, odd sides included (a last row and column outside every window).
TEST_F(LayerGradTest, BatchNormWithReluThenMaxPoolInOneOp) {
  BatchNorm2d bn(*ctx_, "bn", 8, Activation::kRelu, GammaInit::kOne, 0.1f, 1e-5f, NormThen::kMaxPool2x2);
  allocate(bn);
  ASSERT_TRUE(backend_->has_norm_max_pool({.n = 2, .h = 5, .w = 7, .c = 8, .activation = Activation::kRelu}));
  check_module(bn, {2, 5, 7, 8}, 1e-3, 5e-2);
}

// The same layer where the backend runs the two ops (a backend without the fused op, and evaluation): the same
// output as the fused op in training, and evaluation pools the running-statistics normalization.
TEST_F(LayerGradTest, BatchNormThenMaxPoolMatchesTheTwoOps) {
  BatchNorm2d fused(*ctx_, "a", 8, Activation::kRelu, GammaInit::kOne, 1.0f, 1e-5f, NormThen::kMaxPool2x2);
  BatchNorm2d plain(*ctx_, "b", 8, Activation::kRelu, GammaInit::kOne, 1.0f, 1e-5f);
  Pool2d pool(*ctx_, PoolKind::kMax, 2, 2);
  allocate(fused);
  plain.init(7);
  auto xv = random_vector(2 * 6 * 4 * 8, 5, 2.0f);
  Tensor x(xv.data(), {2, 6, 4, 8});
  Tensor a = fused.forward(x);
  const std::vector<float> fused_y(a.f32(), a.f32() + a.numel());
  Tensor b = pool.forward(plain.forward(x));
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(fused_y, std::vector<float>(b.f32(), b.f32() + b.numel()));
  ctx_->mode = Mode::kEval;  // momentum 1: the running statistics are this batch's (unbiased variance)
  Tensor ea = fused.forward(x);
  const std::vector<float> eval_fused(ea.f32(), ea.f32() + ea.numel());
  Tensor eb = pool.forward(plain.forward(x));
  EXPECT_EQ(eval_fused, std::vector<float>(eb.f32(), eb.f32() + eb.numel()));
}

TEST_F(LayerGradTest, BatchNormEvalUsesRunningStatistics) {
  BatchNorm2d bn(*ctx_, "bn", 2, Activation::kNone, GammaInit::kOne, 1.0f);  // momentum 1: running = batch
  allocate(bn);
  auto xv = random_vector(2 * 4 * 4 * 2, 5, 3.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += 2.0f;
  Tensor x(xv.data(), {2, 4, 4, 2});
  std::vector<float> train_y;
  Tensor y = bn.forward(x);
  train_y.assign(y.f32(), y.f32() + y.numel());
  ctx_->mode = Mode::kEval;
  Tensor ye = bn.forward(x);
  // Eval divides by the unbiased variance, training by the biased one: ratio sqrt((m-1)/m) with m = 32.
  const double ratio = std::sqrt(31.0 / 32.0);
  for (int64_t i = 0; i < ye.numel(); ++i) EXPECT_NEAR(ye.f32()[i], train_y[i] * ratio, 1e-3) << i;
}

TEST_F(LayerGradTest, ReluLayer) {
  Relu relu(*ctx_);
  allocate(relu);
  check_module(relu, {2, 3, 3, 4}, 1e-3);
}

TEST_F(LayerGradTest, MaxPool2x2) {
  Pool2d pool(*ctx_, PoolKind::kMax, 2, 2);
  allocate(pool);
  check_module(pool, {2, 4, 5, 3}, 1e-3);
}

TEST_F(LayerGradTest, AvgPool3x3Stride2Padded) {
  Pool2d pool(*ctx_, PoolKind::kAvg, 3, 2, 1);
  allocate(pool);
  check_module(pool, {2, 5, 5, 3});
}

TEST_F(LayerGradTest, GlobalMaxAndAvgPool) {
  Pool2d gmax(*ctx_, PoolKind::kMax, 0, 1);
  Pool2d gavg(*ctx_, PoolKind::kAvg, 0, 1);
  allocate(gmax);
  check_module(gmax, {2, 3, 3, 4}, 1e-3);
  check_module(gavg, {2, 3, 3, 4});
}

TEST_F(LayerGradTest, LinearWithBias) {
  Linear fc(*ctx_, "fc", 12, 5);
  allocate(fc);
  check_module(fc, {3, 1, 1, 12});
}

TEST_F(LayerGradTest, ResidualJoinWithProjectionShortcut) {
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>(*ctx_, "b.conv", 3, 4, 3, 2, 1, InputSize{2, 6, 6});
  auto norm = std::make_unique<BatchNorm2d>(*ctx_, "b.bn", 4, Activation::kNone, GammaInit::kOne);
  auto shortcut = std::make_unique<Sequential>();
  shortcut->add<Conv2d>(*ctx_, "s.conv", 3, 4, 1, 2, 0, InputSize{2, 6, 6});
  ResidualJoin join(*ctx_, std::move(branch), std::move(norm), std::move(shortcut));
  allocate(join);
  check_module(join, {2, 6, 6, 3}, 1e-3, 5e-2);
}

// 64 channels: the CPU backend keeps these activations in its blocked layout (worker/backend/cpu/staging.h) from
// the stem's output through BN + ReLU, the residual block and its add to the global pool, and back.
TEST_F(LayerGradTest, WideBlockOnTheBlockedLayoutFromStemToHead) {
  constexpr int64_t kWide = 64;
  Sequential net;
  net.add<Conv2d>(*ctx_, "stem.conv", 3, kWide, 3, 1, 1, InputSize{2, 5, 5});
  net.add<BatchNorm2d>(*ctx_, "stem.bn", kWide, Activation::kRelu, GammaInit::kOne);
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>(*ctx_, "b.conv1", kWide, kWide, 3, 1, 1, InputSize{2, 5, 5});
  branch->add<BatchNorm2d>(*ctx_, "b.bn1", kWide, Activation::kRelu, GammaInit::kOne);
  branch->add<Conv2d>(*ctx_, "b.conv2", kWide, kWide, 3, 1, 1, InputSize{2, 5, 5});
  net.add<ResidualJoin>(*ctx_, std::move(branch),
                        std::make_unique<BatchNorm2d>(*ctx_, "b.bn2", kWide, Activation::kNone, GammaInit::kOne),
                        nullptr);
  net.add<Pool2d>(*ctx_, PoolKind::kAvg, 0, 1);
  net.add<Linear>(*ctx_, "fc", kWide, 5);
  allocate(net);
  check_module(net, {2, 5, 5, 3}, 1e-3, 5e-2);
}

TEST_F(LayerGradTest, GradientsAreAnnouncedInDecreasingParameterOrder) {
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>(*ctx_, "b.conv", 3, 4, 3, 1, 1, InputSize{2, 4, 4});
  auto norm = std::make_unique<BatchNorm2d>(*ctx_, "b.bn", 4, Activation::kNone, GammaInit::kZero);
  auto shortcut = std::make_unique<Sequential>();
  shortcut->add<Conv2d>(*ctx_, "s.conv", 3, 4, 1, 1, 0, InputSize{2, 4, 4});
  ResidualJoin join(*ctx_, std::move(branch), std::move(norm), std::move(shortcut));
  allocate(join);
  std::vector<size_t> order;
  ctx_->grad_ready = [&](size_t i) { order.push_back(i); };
  auto xv = random_vector(2 * 4 * 4 * 3, 1);
  Tensor y = join.forward(Tensor(xv.data(), {2, 4, 4, 3}));
  auto r = random_vector(static_cast<size_t>(y.numel()), 2);
  join.backward(Tensor(r.data(), y.shape()));
  ASSERT_EQ(order.size(), ctx_->params.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], order.size() - 1 - i);
}

TEST_F(LayerGradTest, ConvWeightImportExportRoundTrip) {
  const ConvGeometry g{4, 8, 8, 3, 16, 3, 3, 1, 1};
  const size_t native_elems = backend_->conv_weight_elements(g);
  EXPECT_GE(native_elems, static_cast<size_t>(g.weight_shape().numel()));
  auto w = random_vector(static_cast<size_t>(g.weight_shape().numel()), 9);
  Buffer native = backend_->allocate(native_elems * 4);
  Tensor nt = native.view({static_cast<int64_t>(native_elems)});
  backend_->conv_weight_import(g, w.data(), nt);
  std::vector<float> back(w.size());
  backend_->conv_weight_export(g, nt, back.data());
  EXPECT_EQ(back, w);
}

TEST_F(LayerGradTest, WrongChannelCountIsRefusedWithTheShape) {
  Conv2d conv(*ctx_, "c", 3, 4, 3, 1, 1, {1, 4, 4});
  allocate(conv);
  std::vector<float> x(1 * 4 * 4 * 2);
  try {
    conv.forward(Tensor(x.data(), {1, 4, 4, 2}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 channels, expected 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torus::worker::nn

namespace torus::worker {
namespace {

TEST(Loss, LabelOutsideTheClassesIsRefusedNamingIt) {
  auto backend = cpu::make_cpu_backend(1);
  std::vector<float> logits(2 * 3, 0.0f), dlogits(6);
  std::vector<int32_t> labels = {1, 3};
  try {
    backend->softmax_cross_entropy(Tensor(logits.data(), {2, 3}), Tensor(labels.data(), {2}, DType::kI32), 0.1f,
                                   Tensor(dlogits.data(), {2, 3}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("labels[1]: label 3 outside [0, 3)"), std::string::npos) << e.what();
  }
}

// --- the activation dtype each layer asks for (training.precision) ----------------------------------------------

// Forward and backward of a whole model on the recording backend: which dtype every op was asked to write.
std::vector<testing::RecordedOp> model_ops(nn::Arch arch, std::vector<int64_t> widths, DType activations) {
  testing::RecordingBackend backend;
  nn::ModelConfig cfg;
  cfg.arch = arch;
  cfg.widths = std::move(widths);
  cfg.batch_size = 2;
  cfg.image_size = 8;
  cfg.activation_dtype = activations;
  nn::Model model(backend, cfg);
  Buffer images = backend.allocate(2 * 8 * 8 * 3 * dtype_size(activations));
  Buffer dlogits = backend.allocate(2 * 10 * sizeof(float));
  backend.ops.clear();
  model.forward(images.view({2, 8, 8, 3}, activations), Mode::kTrain);
  model.backward(dlogits.view({2, 10}));
  return backend.ops;
}

TEST(ActivationDtype, HalfModelsWriteHalfActivationsAndGradientsButFp32LogitsAndWeightGradients) {
  for (DType half : {DType::kBF16, DType::kF16}) {
    // ResNet-9 has the plain residual; ResNet-50 the bottleneck joins with conv shortcuts.
    for (auto [arch, widths] : {std::pair{nn::Arch::kResNet9, std::vector<int64_t>{4, 8}},
                                std::pair{nn::Arch::kResNet50, std::vector<int64_t>{2, 2, 2, 2}}}) {
      const auto ops = model_ops(arch, widths, half);
      int activations = 0;
      for (const testing::RecordedOp& op : ops) {
        SCOPED_TRACE(std::string(api::to_string(arch)) + " " + dtype_name(half) + ": " + op.op);
        if (op.op == "linear" || op.op == "conv_backward_weights" || op.op == "linear_backward_weights") {
          EXPECT_EQ(op.out, DType::kF32);  // logits for the loss; weight gradients into the fp32 masters
        } else {
          EXPECT_EQ(op.out, half);
          ++activations;
        }
      }
      // Every kind of layer ran: conv, BN, the joins, pooling, the classifier, and each one's backward.
      std::set<std::string> seen;
      for (const auto& op : ops) seen.insert(op.op);
      for (const char* kind : {"conv", "norm", "add", "pool", "conv_backward_data", "norm_backward", "pool_backward",
                               "linear_backward_data", "linear"})
        EXPECT_TRUE(seen.count(kind)) << api::to_string(arch) << " never ran " << kind;
      EXPECT_GT(activations, 10);
    }
  }
}

TEST(ActivationDtype, Fp32ModelsWriteOnlyFp32) {
  for (const testing::RecordedOp& op : model_ops(nn::Arch::kResNet9, {4, 8}, DType::kF32))
    EXPECT_EQ(op.out, DType::kF32) << op.op;
}

TEST(ActivationDtype, ImagesInAnotherDtypeThanTheActivationsAreRefusedByTheModel) {
  testing::RecordingBackend backend;
  nn::ModelConfig cfg;
  cfg.widths = {4, 8};
  cfg.batch_size = 2;
  cfg.image_size = 8;
  cfg.activation_dtype = DType::kBF16;
  nn::Model model(backend, cfg);
  Buffer images = backend.allocate(2 * 8 * 8 * 3 * sizeof(float));
  try {
    model.forward(images.view({2, 8, 8, 3}), Mode::kTrain);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("images are f32, activations bf16"), std::string::npos) << e.what();
  }
}

// A window longer than what is left of the image leaves no pixel (floor division, as PyTorch's shape check): the
// model refuses such an image size when it is built, naming the stage, rather than pooling one pixel out of none.
TEST(ModelShape, AnImageTooSmallForTheNetworkIsRefusedWhenTheModelIsBuilt) {
  EXPECT_EQ(output_extent(1, 2, 2, 0), 0) << "a 2x2 window over 1 pixel";
  EXPECT_EQ(output_extent(1, 3, 1, 1), 1) << "3x3 over 1 pixel padded by 1";
  EXPECT_EQ(output_extent(7, 2, 2, 0), 3);
  EXPECT_EQ(output_extent(3, 7, 2, 3), 2);
  EXPECT_EQ((PoolGeometry{2, 1, 1, 8, PoolKind::kMax, 2, 2, 2, 0}.out_h()), 0);
  testing::RecordingBackend backend;
  nn::ModelConfig cfg;
  cfg.widths = {4, 8};
  cfg.batch_size = 2;
  cfg.image_size = 1;  // the prep layer keeps 1x1, the stage's 2x2 max pool has no window left
  try {
    nn::Model model(backend, cfg);
    FAIL() << "a 1x1 image went through a 2x2 max pool";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("image_size too small for this network"), std::string::npos) << e.what();
  }
  cfg.image_size = 2;  // one pixel after the pool, then the global pool
  EXPECT_NO_THROW(nn::Model(backend, cfg));
}

// --- the fused join of a ResNet block (Backend::has_norm_add_relu) -----------------------------------------------

// A ResNet's forward and backward on `backend` from seed 3: the logits, then every parameter gradient in plain
// layout.
std::pair<std::vector<float>, std::vector<float>> model_step(Backend& backend, nn::Arch arch, Mode mode) {
  nn::ModelConfig cfg;
  cfg.arch = arch;
  cfg.widths = {4, 8, 8, 8};
  cfg.batch_size = 2;
  cfg.image_size = 8;
  nn::Model model(backend, cfg);
  model.init(3);
  const auto images = testing::random_vector(2 * 8 * 8 * 3, 4), dlogits = testing::random_vector(2 * 10, 5);
  Buffer x = backend.allocate(images.size() * sizeof(float)), dz = backend.allocate(dlogits.size() * sizeof(float));
  backend.upload(images.data(), x.view({2, 8, 8, 3}));
  backend.upload(dlogits.data(), dz.view({2, 10}));
  Tensor logits = model.forward(x.view({2, 8, 8, 3}), mode);
  std::vector<float> out(static_cast<size_t>(logits.numel()));
  backend.download(logits, out.data());
  if (mode == Mode::kEval) return {out, {}};
  model.backward(dz.view({2, 10}));
  return {out, nn::export_plain(model.context(), model.context().grads)};
}

// ResNet-18 and ResNet-50 on a backend that offers the join (the pretend device composes it of the CPU's ops in the
// layer's own arithmetic) train bit for bit like the two ops on the CPU, one join per block: the residual's gradient
// reaches the shortcut and the normalization's input gradient the branch. Evaluation runs the two ops.
TEST(FusedJoin, ResNetBlocksRunOneJoinEachAndMatchTheTwoOpsBitForBit) {
  for (auto [arch, blocks] : {std::pair{nn::Arch::kResNet18, 8}, std::pair{nn::Arch::kResNet50, 16}}) {
    auto cpu = cpu::make_cpu_backend(1);
    testing::PretendDeviceBackend joined;
    const auto [want_logits, want_grads] = model_step(*cpu, arch, Mode::kTrain);
    const auto [logits, grads] = model_step(joined, arch, Mode::kTrain);
    EXPECT_EQ(joined.joins(), blocks);
    EXPECT_EQ(logits, want_logits);
    ASSERT_EQ(grads.size(), want_grads.size());
    EXPECT_EQ(grads, want_grads) << "the fused join's gradients differ from the two ops'";
    (void)model_step(joined, arch, Mode::kEval);
    EXPECT_EQ(joined.joins(), blocks) << "evaluation runs batch norm with running statistics, then add()";
  }
}

}  // namespace
}  // namespace torus::worker

// A ResNet basic block's forward and backward, the label-smoothed loss and Nesterov SGD against goldens that
// PyTorch produced once (tests/worker/goldens/make_goldens.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "worker/backend/cpu/cpu_backend.h"
#include "worker/nn/model.h"

namespace torus::worker::nn {
namespace {

nlohmann::json load_golden(const std::string& name) {
  const std::string path = std::string(TORUS_SOURCE_DIR) + "/tests/worker/goldens/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden " + path);
  return nlohmann::json::parse(in);
}

// (N, C, H, W) -> (N, H, W, C)
std::vector<float> nchw_to_nhwc(const std::vector<float>& v, int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> out(v.size());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw)
          out[static_cast<size_t>(((in * h + ih) * w + iw) * c + ic)] =
              v[static_cast<size_t>(((in * c + ic) * h + ih) * w + iw)];
  return out;
}

void expect_close(const float* got, const std::vector<float>& want, double tol, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(static_cast<double>(want[i])));
    worst = std::max(worst, err);
    if (err > tol) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", PyTorch " << want[i];
      return;
    }
  }
  ::testing::Test::RecordProperty(what, std::to_string(worst));
}

// The golden's key for an arena entry: conv weights are named by their layer.
std::string golden_key(const ArenaEntry& e) {
  const std::string suffix = ".weight";
  if (e.kind == ParamKind::kConvWeight) return e.name.substr(0, e.name.size() - suffix.size());
  return e.name;
}

TEST(Golden, BasicBlockForwardAndBackwardMatchPyTorch) {
  const nlohmann::json g = load_golden("basic_block.json");
  const int64_t n = g["shape"]["n"], c_in = g["shape"]["c_in"], c_out = g["shape"]["c_out"], h = g["shape"]["h"],
                w = g["shape"]["w"];
  auto backend = cpu::make_cpu_backend(1);
  Context ctx(*backend);
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>(ctx, "conv1", c_in, c_out, 3, 2, 1, InputSize{n, h, w});
  branch->add<BatchNorm2d>(ctx, "bn1", c_out, Activation::kRelu, GammaInit::kOne);
  branch->add<Conv2d>(ctx, "conv2", c_out, c_out, 3, 1, 1, InputSize{n, h / 2, w / 2});
  auto bn2 = std::make_unique<BatchNorm2d>(ctx, "bn2", c_out, Activation::kNone, GammaInit::kOne);
  auto shortcut = std::make_unique<Sequential>();
  shortcut->add<Conv2d>(ctx, "shortcut.conv", c_in, c_out, 1, 2, 0, InputSize{n, h, w});
  shortcut->add<BatchNorm2d>(ctx, "shortcut.bn", c_out, Activation::kNone, GammaInit::kOne);
  ResidualJoin block(ctx, std::move(branch), std::move(bn2), std::move(shortcut));
  auto alloc = [&](size_t bytes) { return backend->allocate(bytes); };
  ctx.params.allocate(alloc);
  ctx.stats.allocate(alloc);
  ctx.grads = ctx.params.mirror(alloc);
  block.init(0);

  std::vector<float> params;
  for (const ArenaEntry& e : ctx.params.entries()) {
    const std::vector<float> v = g["params"].at(golden_key(e));
    params.insert(params.end(), v.begin(), v.end());
  }
  import_plain(ctx, ctx.params, params);

  std::vector<float> x = nchw_to_nhwc(g["x"].get<std::vector<float>>(), n, c_in, h, w);
  Tensor y = block.forward(Tensor(x.data(), {n, h, w, c_in}));
  const int64_t oh = y.shape()[1], ow = y.shape()[2];
  expect_close(y.f32(), nchw_to_nhwc(g["y"].get<std::vector<float>>(), n, c_out, oh, ow), 1e-4, "y");

  std::vector<float> dy = nchw_to_nhwc(g["dy"].get<std::vector<float>>(), n, c_out, oh, ow);
  Tensor dx = block.backward(Tensor(dy.data(), y.shape()));
  expect_close(dx.f32(), nchw_to_nhwc(g["dx"].get<std::vector<float>>(), n, c_in, h, w), 1e-4, "dx");

  const std::vector<float> grads = export_plain(ctx, ctx.grads);
  size_t at = 0;
  for (const ArenaEntry& e : ctx.params.entries()) {
    expect_close(grads.data() + at, g["grads"].at(golden_key(e)).get<std::vector<float>>(), 1e-4, "d" + e.name);
    at += static_cast<size_t>(e.logical_shape.numel());
  }
  const std::vector<float> stats = export_plain(ctx, ctx.stats);
  at = 0;
  for (const ArenaEntry& e : ctx.stats.entries()) {
    if (g["running"].contains(e.name))
      expect_close(stats.data() + at, g["running"][e.name].get<std::vector<float>>(), 1e-4, e.name);
    at += static_cast<size_t>(e.logical_shape.numel());
  }
}

TEST(Golden, LabelSmoothedCrossEntropyMatchesPyTorch) {
  const nlohmann::json g = load_golden("loss_sgd.json");
  const int64_t n = g["n"], k = g["k"];
  auto backend = cpu::make_cpu_backend(1);
  std::vector<float> logits = g["logits"];
  std::vector<int32_t> labels = g["labels"];
  std::vector<float> dlogits(logits.size());
  const double loss =
      backend->softmax_cross_entropy(Tensor(logits.data(), {n, k}), Tensor(labels.data(), {n}, DType::kI32),
                                     g["smoothing"].get<float>(), Tensor(dlogits.data(), {n, k}));
  EXPECT_NEAR(loss, g["loss"].get<double>(), 1e-5);
  expect_close(dlogits.data(), g["dlogits"].get<std::vector<float>>(), 1e-5, "dlogits");
}

TEST(Golden, NesterovSgdWithWeightDecayMatchesPyTorch) {
  const nlohmann::json g = load_golden("loss_sgd.json")["sgd"];
  auto backend = cpu::make_cpu_backend(1);
  std::vector<float> w = g["w0"];
  std::vector<float> v(w.size(), 0.0f);
  const SgdHyper h{g["lr"].get<float>(), g["momentum"].get<float>(), g["weight_decay"].get<float>(),
                   math::Nesterov::kOn};
  const int64_t size = static_cast<int64_t>(w.size());
  for (const auto& grad_json : g["grads"]) {
    std::vector<float> grad = grad_json;
    backend->sgd_update(Tensor(w.data(), {size}), Tensor(grad.data(), {size}), Tensor(v.data(), {size}), h);
  }
  expect_close(w.data(), g["w3"].get<std::vector<float>>(), 1e-5, "w after 3 steps");
}

}  // namespace
}  // namespace torus::worker::nn

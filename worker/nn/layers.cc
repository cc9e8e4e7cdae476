#include "worker/nn/layers.h"

#include <cmath>
#include <stdexcept>

#include "common/util/error.h"

namespace torus::worker::nn {
namespace {

// One generator per parameter index: initialization does not depend on construction or call order.
std::mt19937_64 param_rng(uint64_t seed, size_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index)};
  return std::mt19937_64(seq);
}

void expect_rank4(const Shape& s, const char* layer) {
  if (s.rank() != 4) throw InvalidArgument(std::string(layer) + ": expected (N, H, W, C), got " + s.str());
}

}  // namespace

Tensor Scratch::get(Backend& backend, Shape shape, DType dtype) {
  const Tensor raw = bytes(backend, static_cast<size_t>(shape.numel()) * dtype_size(dtype));
  return Tensor(raw.data(), shape, dtype);
}

Tensor Scratch::bytes(Backend& backend, size_t bytes) {
  if (buffer_.data() == nullptr || buffer_.bytes() < bytes) buffer_ = backend.allocate(std::max<size_t>(bytes, 4));
  const int64_t floats = static_cast<int64_t>((bytes + 3) / 4);
  return Tensor(buffer_.data(), Shape{floats});
}

// --- Conv2d ----------------------------------------------------------------------------------------------

Conv2d::Conv2d(Context& ctx, const std::string& name, int64_t c_in, int64_t c_out, int64_t kernel, int64_t stride,
               int64_t pad, InputSize ref, InputGrad input_grad)
    : ctx_(ctx), g_{ref.n, ref.h, ref.w, c_in, c_out, kernel, kernel, stride, pad}, input_grad_(input_grad) {
  weight_ =
      ctx.params.add(name + ".weight", ParamKind::kConvWeight, g_.weight_shape(), ctx.backend.conv_weight_elements(g_));
  ctx.conv_layouts.emplace(weight_, g_);
}

ConvGeometry Conv2d::geometry_for(const Shape& x) const {
  expect_rank4(x, "conv");
  if (x[3] != g_.c_in)
    throw InvalidArgument("conv: input has " + std::to_string(x[3]) + " channels, expected " + std::to_string(g_.c_in));
  ConvGeometry g = g_;
  g.n = x[0];
  g.h = x[1];
  g.w = x[2];
  return g;
}

void Conv2d::init(uint64_t seed) {
  // Kaiming normal, fan-out, for a following ReLU (torchvision's ResNet init).
  auto rng = param_rng(seed, weight_);
  std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(g_.c_out * g_.kh * g_.kw)));
  std::vector<float> oihw(static_cast<size_t>(g_.weight_shape().numel()));
  for (float& v : oihw) v = normal(rng);
  ctx_.backend.conv_weight_import(g_, oihw.data(), ctx_.param(weight_));
}

Tensor Conv2d::forward(Tensor x) {
  ConvGeometry g = geometry_for(x.shape());
  x_ = x;
  Tensor y = y_.get(ctx_.backend, g.output_shape(), ctx_.activation_dtype);  // (N, H', W', C_out)
  ctx_.backend.conv_forward(g, x, ctx_.param(weight_), y);
  return y;
}

Tensor Conv2d::backward(Tensor dy) {
  ConvGeometry g = geometry_for(x_.shape());
  ctx_.backend.conv_backward_weights(g, x_, dy, ctx_.grad(weight_));
  ctx_.notify_grad(weight_);
  if (input_grad_ == InputGrad::kSkip) return {};
  Tensor dx = dx_.get(ctx_.backend, x_.shape(), x_.dtype());
  ctx_.backend.conv_backward_data(g, dy, ctx_.param(weight_), dx);
  return dx;
}

// --- BatchNorm2d -----------------------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(Context& ctx, const std::string& name, int64_t c, Activation act, GammaInit gamma_init,
                         float momentum, float eps, NormThen then)
    : ctx_(ctx), c_(c), act_(act), gamma_init_(gamma_init), momentum_(momentum), eps_(eps) {
  if (then == NormThen::kMaxPool2x2) pool_ = std::make_unique<Pool2d>(ctx, PoolKind::kMax, 2, 2);
  const auto n = static_cast<size_t>(c);
  gamma_ = ctx.params.add(name + ".weight", ParamKind::kNormScale, {c}, n);
  beta_ = ctx.params.add(name + ".bias", ParamKind::kNormShift, {c}, n);
  running_mean_ = ctx.stats.add(name + ".running_mean", ParamKind::kNormStat, {c}, n);
  running_var_ = ctx.stats.add(name + ".running_var", ParamKind::kNormStat, {c}, n);
}

NormGeometry BatchNorm2d::geometry_for(const Shape& x) const {
  expect_rank4(x, "batch norm");
  if (x[3] != c_)
    throw InvalidArgument("batch norm: input has " + std::to_string(x[3]) + " channels, expected " +
                          std::to_string(c_));
  return {x[0], x[1], x[2], c_, eps_, act_};
}

void BatchNorm2d::init(uint64_t /*seed*/) {
  ctx_.backend.fill(ctx_.param(gamma_), gamma_init_ == GammaInit::kZero ? 0.0f : 1.0f);
  ctx_.backend.fill(ctx_.param(beta_), 0.0f);
  ctx_.backend.fill(ctx_.stats.view(running_mean_), 0.0f);
  ctx_.backend.fill(ctx_.stats.view(running_var_), 1.0f);
}

BatchNorm2d::~BatchNorm2d() = default;

Tensor BatchNorm2d::forward(Tensor x) {
  NormGeometry g = geometry_for(x.shape());
  x_ = x;
  Tensor gamma = ctx_.param(gamma_), beta = ctx_.param(beta_);
  Tensor rm = ctx_.stats.view(running_mean_), rv = ctx_.stats.view(running_var_);
  fused_ =
      pool_ != nullptr && ctx_.mode == Mode::kTrain && x.dtype() == DType::kF32 && ctx_.backend.has_norm_max_pool(g);
  if (fused_) {
    Tensor y = y_.get(ctx_.backend, g.max_pooled_shape(), ctx_.activation_dtype);
    ctx_.backend.norm_max_pool_forward_training(g, x, gamma, beta, y, mean_.get(ctx_.backend, {c_}),
                                                var_.get(ctx_.backend, {c_}), rm, rv, momentum_);
    return y;
  }
  Tensor y = y_.get(ctx_.backend, x.shape(), ctx_.activation_dtype);
  if (ctx_.mode == Mode::kEval) {
    ctx_.backend.norm_forward_inference(g, x, gamma, beta, rm, rv, y);
  } else {
    Tensor ws = workspace_.bytes(ctx_.backend, ctx_.backend.norm_workspace_bytes(g));
    ctx_.backend.norm_forward_training(g, x, gamma, beta, y, mean_.get(ctx_.backend, {c_}),
                                       var_.get(ctx_.backend, {c_}), rm, rv, momentum_, ws);
  }
  return pool_ != nullptr ? pool_->forward(y) : y;
}

void BatchNorm2d::announce_grads() const {
  ctx_.notify_grad(beta_);
  ctx_.notify_grad(gamma_);
}

Tensor BatchNorm2d::backward(Tensor dy) {
  Tensor dx = backward_unannounced(dy);
  announce_grads();
  return dx;
}

Tensor BatchNorm2d::backward_unannounced(Tensor dy) {
  NormGeometry g = geometry_for(x_.shape());
  Tensor dx = dx_.get(ctx_.backend, x_.shape(), x_.dtype());
  if (fused_) {
    ctx_.backend.norm_max_pool_backward(g, x_, dy, ctx_.param(gamma_), ctx_.param(beta_), mean_.get(ctx_.backend, {c_}),
                                        var_.get(ctx_.backend, {c_}), dx, ctx_.grad(gamma_), ctx_.grad(beta_));
    return dx;
  }
  if (pool_ != nullptr) dy = pool_->backward(dy);
  Tensor ws = workspace_.bytes(ctx_.backend, ctx_.backend.norm_workspace_bytes(g));
  ctx_.backend.norm_backward(g, x_, dy, ctx_.param(gamma_), ctx_.param(beta_), mean_.get(ctx_.backend, {c_}),
                             var_.get(ctx_.backend, {c_}), ws, dx, ctx_.grad(gamma_), ctx_.grad(beta_));
  return dx;
}

Tensor BatchNorm2d::forward_add_relu(Tensor x, Tensor residual) {
  if (act_ != Activation::kNone || pool_ != nullptr)
    throw std::logic_error("batch norm: forward_add_relu() needs a layer built without activation or pool");
  NormGeometry g = geometry_for(x.shape());
  g.activation = Activation::kRelu;  // after the add
  join_fused_ = ctx_.mode == Mode::kTrain && ctx_.backend.has_norm_add_relu(g);
  joined_ = join_y_.get(ctx_.backend, x.shape(), ctx_.activation_dtype);
  if (join_fused_) {
    x_ = x;
    Tensor ws = workspace_.bytes(ctx_.backend, ctx_.backend.norm_workspace_bytes(g));
    ctx_.backend.norm_add_relu_forward_training(
        g, x, residual, ctx_.param(gamma_), ctx_.param(beta_), joined_, mean_.get(ctx_.backend, {c_}),
        var_.get(ctx_.backend, {c_}), ctx_.stats.view(running_mean_), ctx_.stats.view(running_var_), momentum_, ws);
    return joined_;
  }
  ctx_.backend.add(forward(x), residual, joined_, Activation::kRelu);
  return joined_;
}

std::pair<Tensor, Tensor> BatchNorm2d::backward_add_relu(Tensor dy) {
  Tensor dresidual = join_grad_.get(ctx_.backend, joined_.shape(), dy.dtype());
  if (!join_fused_) {
    ctx_.backend.relu_backward(joined_, dy, dresidual);
    return {backward_unannounced(dresidual), dresidual};
  }
  NormGeometry g = geometry_for(x_.shape());
  g.activation = Activation::kRelu;
  Tensor dx = dx_.get(ctx_.backend, x_.shape(), x_.dtype());
  Tensor ws = workspace_.bytes(ctx_.backend, ctx_.backend.norm_workspace_bytes(g));
  ctx_.backend.norm_add_relu_backward(g, x_, joined_, dy, ctx_.param(gamma_), ctx_.param(beta_),
                                      mean_.get(ctx_.backend, {c_}), var_.get(ctx_.backend, {c_}), ws, dx, dresidual,
                                      ctx_.grad(gamma_), ctx_.grad(beta_));
  return {dx, dresidual};
}

// --- Relu ------------------------------------------------------------------------------------------------

Tensor Relu::forward(Tensor x) {
  y_ = out_.get(ctx_.backend, x.shape(), ctx_.activation_dtype);
  ctx_.backend.relu_forward(x, y_);
  return y_;
}

Tensor Relu::backward(Tensor dy) {
  Tensor dx = dx_.get(ctx_.backend, y_.shape(), y_.dtype());
  ctx_.backend.relu_backward(y_, dy, dx);
  return dx;
}

// --- Pool2d ----------------------------------------------------------------------------------------------

PoolGeometry Pool2d::geometry_for(const Shape& x) const {
  expect_rank4(x, "pool");
  if (kernel_ == 0) return PoolGeometry::global(x[0], x[1], x[2], x[3], kind_);
  return {x[0], x[1], x[2], x[3], kind_, kernel_, kernel_, stride_, pad_};
}

Tensor Pool2d::forward(Tensor x) {
  g_ = geometry_for(x.shape());
  Tensor y = y_.get(ctx_.backend, g_.output_shape(), ctx_.activation_dtype);
  ctx_.backend.pool_forward(g_, x, y, workspace_.bytes(ctx_.backend, ctx_.backend.pool_workspace_bytes(g_)));
  return y;
}

Tensor Pool2d::backward(Tensor dy) {
  Tensor dx = dx_.get(ctx_.backend, g_.input_shape(), dy.dtype());
  ctx_.backend.pool_backward(g_, dy, workspace_.bytes(ctx_.backend, ctx_.backend.pool_workspace_bytes(g_)), dx);
  return dx;
}

// --- Linear ----------------------------------------------------------------------------------------------

Linear::Linear(Context& ctx, const std::string& name, int64_t in, int64_t out) : ctx_(ctx), in_(in), out_(out) {
  weight_ = ctx.params.add(name + ".weight", ParamKind::kLinearWeight, {out, in}, static_cast<size_t>(out * in));
  bias_ = ctx.params.add(name + ".bias", ParamKind::kBias, {out}, static_cast<size_t>(out));
}

void Linear::init(uint64_t seed) {
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  for (size_t index : {weight_, bias_}) {
    auto rng = param_rng(seed, index);
    std::uniform_real_distribution<float> uniform(-bound, bound);
    std::vector<float> values(static_cast<size_t>(ctx_.params.entry(index).logical_shape.numel()));
    for (float& v : values) v = uniform(rng);
    ctx_.backend.upload(values.data(), ctx_.param(index));
  }
}

Tensor Linear::forward(Tensor x) {
  const int64_t n = x.shape()[0];
  if (x.numel() != n * in_)
    throw InvalidArgument("linear: input " + x.shape().str() + " does not have " + std::to_string(in_) +
                          " features per sample");
  x_shape_ = x.shape();
  x_ = x.reshaped({n, in_});
  Tensor y = y_.get(ctx_.backend, {n, out_});  // (N, out): logits stay fp32 for the loss
  ctx_.backend.linear_forward({n, in_, out_}, x_, ctx_.param(weight_), ctx_.param(bias_), y);
  return y;
}

Tensor Linear::backward(Tensor dy) {
  const LinearGeometry g{x_.shape()[0], in_, out_};
  ctx_.backend.linear_backward_weights(g, x_, dy, ctx_.grad(weight_), ctx_.grad(bias_));
  ctx_.notify_grad(bias_);
  ctx_.notify_grad(weight_);
  Tensor dx = dx_.get(ctx_.backend, x_shape_, x_.dtype());
  ctx_.backend.linear_backward_data(g, dy, ctx_.param(weight_), dx.reshaped({g.n, in_}));
  return dx;
}

// --- Sequential and residuals ----------------------------------------------------------------------------

Tensor Sequential::forward(Tensor x) {
  for (auto& layer : layers_) x = layer->forward(x);
  return x;
}

Tensor Sequential::backward(Tensor dy) {
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dy = (*it)->backward(dy);
  return dy;
}

void Sequential::init(uint64_t seed) {
  for (auto& layer : layers_) layer->init(seed);
}

Tensor Residual::forward(Tensor x) {
  Tensor b = body_->forward(x);
  Tensor y = y_.get(ctx_.backend, x.shape(), ctx_.activation_dtype);
  ctx_.backend.add(x, b, y, Activation::kNone);
  return y;
}

Tensor Residual::backward(Tensor dy) {
  Tensor db = body_->backward(dy);
  Tensor dx = dx_.get(ctx_.backend, dy.shape(), dy.dtype());
  ctx_.backend.add(db, dy, dx, Activation::kNone);
  return dx;
}

void ResidualJoin::init(uint64_t seed) {
  branch_->init(seed);
  norm_->init(seed);
  if (shortcut_) shortcut_->init(seed);
}

Tensor ResidualJoin::forward(Tensor x) {
  Tensor b = branch_->forward(x);
  Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  return norm_->forward_add_relu(b, s);
}

Tensor ResidualJoin::backward(Tensor dy) {
  auto [db, dz] = norm_->backward_add_relu(dy);
  // The shortcut registered its parameters after the branch: its gradients are announced first, then the join
  // norm's, then the rest of the branch's (decreasing parameter order, as the buckets expect them).
  Tensor ds = shortcut_ ? shortcut_->backward(dz) : dz;
  norm_->announce_grads();
  db = branch_->backward(db);
  Tensor dx = dx_.get(ctx_.backend, db.shape(), db.dtype());
  ctx_.backend.add(db, ds, dx, Activation::kNone);
  return dx;
}

}  // namespace torus::worker::nn

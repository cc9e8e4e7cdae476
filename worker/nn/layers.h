#pragma once
// Layers with explicit forward and backward over the Backend interface (no autograd, no backend knowledge).
// Each layer owns its output and input-gradient buffers (regrown when the batch or image size changes) and
// registers its parameters in the Context's arenas at construction, in forward order.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/mode.h"
#include "worker/tensor/arena.h"

namespace torus::worker::nn {

// The first layer does not need the gradient of the images.
enum class InputGrad : uint8_t { kCompute, kSkip };
// The last BN of a residual branch starts at gamma = 0, so every block starts as the identity.
enum class GammaInit : uint8_t { kOne, kZero };

// What layers share: the backend, the arenas, the mode, and who wants to hear that a gradient is final.
struct Context {
  Backend& backend;
  Arena params;  // trainable parameters, in registration order
  Arena stats;   // BN running mean / variance
  Arena grads;   // mirror of params, allocated with it
  Mode mode = Mode::kTrain;
  // The dtype of every layer's output and input gradient (spec.training.precision: bf16/fp16 on the GPU engine),
  // except the classifier's output: logits stay fp32 for the loss. Parameters, gradients and statistics stay fp32
  // whatever it is (master weights); the first layer's input is expected in this dtype too.
  DType activation_dtype = DType::kF32;
  std::function<void(size_t)> grad_ready;  // param index; called in backward order
  // Conv weights live in a backend-native layout; this is how to convert parameter i (or its momentum).
  std::map<size_t, ConvGeometry> conv_layouts;

  explicit Context(Backend& b) : backend(b) {}
  Tensor param(size_t i) const { return params.view(i); }
  Tensor grad(size_t i) const { return grads.view(i); }
  void notify_grad(size_t i) const {
    if (grad_ready) grad_ready(i);
  }
};

// A buffer that grows to the largest shape asked of it.
class Scratch {
 public:
  Tensor get(Backend& backend, Shape shape, DType dtype = DType::kF32);
  Tensor bytes(Backend& backend, size_t bytes);

 private:
  Buffer buffer_;
};

class Module {
 public:
  virtual ~Module() = default;
  // x (N, H, W, C) -> y; keeps what backward needs.
  virtual Tensor forward(Tensor x) = 0;
  // dy -> dx (empty when the layer skips its input gradient); writes parameter gradients.
  virtual Tensor backward(Tensor dy) = 0;
  // Deterministic initialization from the seed (parameters are seeded by their index, not by call order).
  virtual void init(uint64_t /*seed*/) {}
};

// The reference input a layer is built for: fixes backend weight layouts; other sizes still work.
struct InputSize {
  int64_t n, h, w;
};

class Conv2d final : public Module {
 public:
  Conv2d(Context& ctx, const std::string& name, int64_t c_in, int64_t c_out, int64_t kernel, int64_t stride,
         int64_t pad, InputSize ref, InputGrad input_grad = InputGrad::kCompute);
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override;
  size_t weight_index() const { return weight_; }
  ConvGeometry geometry_for(const Shape& x) const;

 private:
  Context& ctx_;
  ConvGeometry g_;
  InputGrad input_grad_;
  size_t weight_;
  Tensor x_;
  Scratch y_, dx_;
};

// What follows a batch norm inside the layer: nothing, or a 2x2 stride-2 max pool, which training runs as one op
// where the backend has it (Backend::has_norm_max_pool: the normalized tensor is never stored) and as the two ops
// elsewhere and in evaluation.
enum class NormThen : uint8_t { kNothing, kMaxPool2x2 };

class Pool2d;

class BatchNorm2d final : public Module {
 public:
  BatchNorm2d(Context& ctx, const std::string& name, int64_t c, Activation act, GammaInit gamma_init,
              float momentum = 0.1f, float eps = 1e-5f, NormThen then = NormThen::kNothing);
  ~BatchNorm2d() override;
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override;
  // The join of a ResNet block, relu(this(x) + residual) (a layer built without activation): one backend op in
  // training where the backend has it (Backend::has_norm_add_relu), else this layer's forward, then add() with the
  // ReLU. backward_add_relu(dy of the join's output) -> {this layer's input gradient, the residual's gradient}; it
  // writes gamma's and beta's gradients without announcing them: announce_grads() does, once the join ran its
  // shortcut's backward (registered later), so that gradients are announced in decreasing parameter order.
  Tensor forward_add_relu(Tensor x, Tensor residual);
  std::pair<Tensor, Tensor> backward_add_relu(Tensor dy);
  void announce_grads() const;

 private:
  NormGeometry geometry_for(const Shape& x) const;
  Tensor backward_unannounced(Tensor dy);
  Context& ctx_;
  int64_t c_;
  Activation act_;
  GammaInit gamma_init_;
  float momentum_, eps_;
  size_t gamma_, beta_, running_mean_, running_var_;
  Tensor x_, joined_;  // joined_: the join's output (forward_add_relu)
  Scratch y_, dx_, mean_, var_, workspace_, join_y_, join_grad_;
  std::unique_ptr<Pool2d> pool_;  // NormThen::kMaxPool2x2 where the backend runs the two ops
  bool fused_ = false;            // the last forward ran norm_max_pool_forward_training
  bool join_fused_ = false;       // the last forward_add_relu ran norm_add_relu_forward_training
};

class Relu final : public Module {
 public:
  explicit Relu(Context& ctx) : ctx_(ctx) {}
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;

 private:
  Context& ctx_;
  Tensor y_;
  Scratch out_, dx_;
};

class Pool2d final : public Module {
 public:
  // kernel == 0: global pooling over the whole image.
  Pool2d(Context& ctx, PoolKind kind, int64_t kernel, int64_t stride, int64_t pad = 0)
      : ctx_(ctx), kind_(kind), kernel_(kernel), stride_(stride), pad_(pad) {}
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;

 private:
  PoolGeometry geometry_for(const Shape& x) const;
  Context& ctx_;
  PoolKind kind_;
  int64_t kernel_, stride_, pad_;
  PoolGeometry g_;
  Scratch y_, dx_, workspace_;
};

// x (N, H, W, C) with H * W * C == in -> y (N, out).
class Linear final : public Module {
 public:
  Linear(Context& ctx, const std::string& name, int64_t in, int64_t out);
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override;

 private:
  Context& ctx_;
  int64_t in_, out_;
  size_t weight_, bias_;
  Shape x_shape_;
  Tensor x_;
  Scratch y_, dx_;
};

class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename M, typename... Args>
  M& add(Args&&... args) {
    auto m = std::make_unique<M>(std::forward<Args>(args)...);
    M& ref = *m;
    layers_.push_back(std::move(m));
    return ref;
  }
  void append(std::unique_ptr<Module> m) { layers_.push_back(std::move(m)); }
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override;
  bool empty() const { return layers_.empty(); }

 private:
  std::vector<std::unique_ptr<Module>> layers_;
};

// y = x + body(x), no activation after the join (Page's ResNet-9 residual).
class Residual final : public Module {
 public:
  Residual(Context& ctx, std::unique_ptr<Sequential> body) : ctx_(ctx), body_(std::move(body)) {}
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override { body_->init(seed); }

 private:
  Context& ctx_;
  std::unique_ptr<Sequential> body_;
  Scratch y_, dx_;
};

// y = relu(norm(branch(x)) + shortcut(x)); shortcut is the identity when empty (ResNet basic/bottleneck join). The
// branch's last batch norm is the join's own `norm`, so the normalization, the add and the ReLU can run as one op.
class ResidualJoin final : public Module {
 public:
  ResidualJoin(Context& ctx, std::unique_ptr<Sequential> branch, std::unique_ptr<BatchNorm2d> norm,
               std::unique_ptr<Sequential> shortcut)
      : ctx_(ctx), branch_(std::move(branch)), norm_(std::move(norm)), shortcut_(std::move(shortcut)) {}
  Tensor forward(Tensor x) override;
  Tensor backward(Tensor dy) override;
  void init(uint64_t seed) override;

 private:
  Context& ctx_;
  std::unique_ptr<Sequential> branch_;
  std::unique_ptr<BatchNorm2d> norm_;
  std::unique_ptr<Sequential> shortcut_;
  Scratch dx_;
};

}  // namespace torus::worker::nn

#pragma once
// A Backend that computes nothing and records what it was asked: each op's name and the dtypes of the tensors it
// wrote. What the CPU tests use to check the mixed-precision plumbing (which dtype each layer asks for, which loss-
// scaling calls the trainer makes, in which order) without a GPU: the CPU engine refuses half activations.
// Memory is host memory (zero-filled); the loss is a fixed number; loss scaling runs the GPU's own state machine
// (kmath::loss_scale_update) on the host, so the schedule the trainer drives is the one a GPU would follow.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/backend.h"
#include "worker/backend/cuda/kernel_math.h"

namespace torus::worker::testing {

struct RecordedOp {
  std::string op;
  DType out = DType::kF32;  // the dtype of the tensor the op wrote (y, or dx for a backward)
};

class RecordingBackend final : public Backend {
 public:
  std::vector<RecordedOp> ops;
  // Makes the next unscale_gradients() find a non-finite gradient, as an fp16 overflow would.
  bool inject_overflow = false;

  std::string name() const override { return "recording"; }
  int threads() const override { return 1; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }

  Buffer allocate(size_t bytes) override { return allocate_host(bytes); }
  void upload(const void* host, Tensor dst) override { std::memcpy(dst.data(), host, dst.bytes()); }
  void download(Tensor src, void* host) override { std::memcpy(host, src.data(), src.bytes()); }
  void copy(Tensor /*src*/, Tensor dst) override { record("copy", dst); }
  void fill(Tensor /*t*/, float /*value*/) override {}
  void synchronize() override {}

  size_t conv_weight_elements(const ConvGeometry& g) override { return static_cast<size_t>(g.weight_shape().numel()); }
  void conv_weight_import(const ConvGeometry& /*g*/, const float* /*host*/, Tensor /*native*/) override {}
  void conv_weight_export(const ConvGeometry& /*g*/, Tensor native, float* host) override {
    std::memset(host, 0, native.bytes());
  }
  void conv_forward(const ConvGeometry& /*g*/, Tensor /*x*/, Tensor /*w*/, Tensor y) override { record("conv", y); }
  void conv_backward_data(const ConvGeometry& /*g*/, Tensor /*dy*/, Tensor /*w*/, Tensor dx) override {
    record("conv_backward_data", dx);
  }
  void conv_backward_weights(const ConvGeometry& /*g*/, Tensor /*x*/, Tensor /*dy*/, Tensor dw) override {
    record("conv_backward_weights", dw);
  }

  size_t norm_workspace_bytes(const NormGeometry& /*g*/) override { return 0; }
  void norm_forward_training(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*gamma*/, Tensor /*beta*/, Tensor y,
                             Tensor /*save_mean*/, Tensor /*save_var*/, Tensor /*running_mean*/,
                             Tensor /*running_var*/, float /*momentum*/, Tensor /*workspace*/) override {
    record("norm", y);
  }
  void norm_forward_inference(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*gamma*/, Tensor /*beta*/,
                              Tensor /*mean*/, Tensor /*var*/, Tensor y) override {
    record("norm", y);
  }
  void norm_backward(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*dy*/, Tensor /*gamma*/, Tensor /*beta*/,
                     Tensor /*save_mean*/, Tensor /*save_var*/, Tensor /*workspace*/, Tensor dx, Tensor /*dgamma*/,
                     Tensor /*dbeta*/) override {
    record("norm_backward", dx);
  }

  void relu_forward(Tensor /*x*/, Tensor y) override { record("relu", y); }
  void relu_backward(Tensor /*y*/, Tensor /*dy*/, Tensor dx) override { record("relu_backward", dx); }
  void add(Tensor /*a*/, Tensor /*b*/, Tensor y, Activation /*act*/) override { record("add", y); }

  size_t pool_workspace_bytes(const PoolGeometry& /*g*/) override { return 0; }
  void pool_forward(const PoolGeometry& /*g*/, Tensor /*x*/, Tensor y, Tensor /*workspace*/) override {
    record("pool", y);
  }
  void pool_backward(const PoolGeometry& /*g*/, Tensor /*dy*/, Tensor /*workspace*/, Tensor dx) override {
    record("pool_backward", dx);
  }

  void linear_forward(const LinearGeometry& /*g*/, Tensor /*x*/, Tensor /*w*/, Tensor /*b*/, Tensor y) override {
    record("linear", y);
  }
  void linear_backward_data(const LinearGeometry& /*g*/, Tensor /*dy*/, Tensor /*w*/, Tensor dx) override {
    record("linear_backward_data", dx);
  }
  void linear_backward_weights(const LinearGeometry& /*g*/, Tensor /*x*/, Tensor /*dy*/, Tensor dw,
                               Tensor /*db*/) override {
    record("linear_backward_weights", dw);
  }

  double softmax_cross_entropy(Tensor logits, Tensor /*labels*/, float /*smoothing*/, Tensor dlogits) override {
    record("loss", logits);
    if (!dlogits.empty()) record("loss_gradient", dlogits);
    return 1.0;
  }
  int64_t count_top_k(Tensor /*logits*/, Tensor /*labels*/, int /*k*/) override { return 0; }

  void sgd_update(Tensor param, Tensor /*grad*/, Tensor /*momentum*/, const SgdHyper& /*h*/) override {
    // The CUDA backend's sgd kernel skips the step when the unscale pass flagged an overflow: so does this.
    record(loss_scale_ && loss_scale_->found_inf != 0 ? "sgd_skipped" : "sgd", param);
  }

  bool supports_activations(DType dtype) const override { return dtype != DType::kI32 && dtype != DType::kI64; }
  void enable_loss_scaling(const LossScaleConfig& config) override {
    config_ = config;
    loss_scale_ = cuda::kmath::loss_scale_initial(config);
    ops.push_back({"enable_loss_scaling", DType::kF32});
  }
  void unscale_gradients(Tensor grads) override {
    if (!loss_scale_) throw InvalidArgument("recording backend: unscale without loss scaling");
    if (inject_overflow) loss_scale_->found_inf = 1;
    inject_overflow = false;
    record("unscale", grads);
  }
  void update_loss_scale() override {
    if (!loss_scale_) throw InvalidArgument("recording backend: update without loss scaling");
    cuda::kmath::loss_scale_update(*loss_scale_, config_);
    ops.push_back({"update_loss_scale", DType::kF32});
  }
  LossScaleState loss_scale_state() override {
    if (!loss_scale_) throw InvalidArgument("recording backend: no loss scaling");
    return *loss_scale_;
  }
  void set_loss_scale_state(const LossScaleState& state) override {
    if (!loss_scale_) throw InvalidArgument("recording backend: no loss scaling");
    loss_scale_ = state;
  }

  // The ops recorded under `name`, in order.
  std::vector<RecordedOp> named(const std::string& op) const {
    std::vector<RecordedOp> out;
    for (const RecordedOp& r : ops)
      if (r.op == op) out.push_back(r);
    return out;
  }

 private:
  void record(const char* op, Tensor t) { ops.push_back({op, t.dtype()}); }
  LossScaleConfig config_;
  std::optional<LossScaleState> loss_scale_;
};

}  // namespace torus::worker::testing

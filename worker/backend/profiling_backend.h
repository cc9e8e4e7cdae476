#pragma once
// A Backend that forwards every call to another one and accumulates wall time per op, so a benchmark can say
// where a training step's time goes. It synchronizes after each op (so GPU time is attributed correctly).
// Every virtual of Backend is overridden here, so a profiled run runs what the inner backend would (its fused and
// optional ops included); tests/worker/profiling_backend_test.cc fails when Backend gains one this class does not
// override. The one call not passed on is kNotForwarded's, with its reason.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "worker/backend/backend.h"

namespace torus::worker {

// kPerShape splits convolutions, normalizations and poolings by geometry ("conv_forward 8>16 28x28 k3s1"), so a
// profile says which layer to work on.
enum class ProfileDetail { kPerOp, kPerShape };

class ProfilingBackend final : public Backend {
 public:
  // capture_step: a profile synchronizes after every op, which a captured step (CUDA Graph) cannot record; so
  // training_offers() says capture is not offered and the trainer runs every step eagerly, each op timed.
  static constexpr std::array<std::string_view, 1> kNotForwarded = {"capture_step"};

  struct OpStats {
    double seconds = 0;
    int64_t calls = 0;
  };
  explicit ProfilingBackend(Backend& inner, ProfileDetail detail = ProfileDetail::kPerOp)
      : inner_(inner), detail_(detail) {}

  const std::map<std::string, OpStats>& stats() const { return stats_; }
  void reset() { stats_.clear(); }
  // "op  seconds  share  calls" lines, largest first.
  std::string report() const {
    std::vector<std::pair<std::string, OpStats>> rows(stats_.begin(), stats_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& r : rows) total += r.second.seconds;
    std::string out;
    char line[160];
    for (const auto& [op, s] : rows) {
      std::snprintf(line, sizeof(line), "  %-44s %9.3f s  %5.1f%%  %8lld calls\n", op.c_str(), s.seconds,
                    total > 0 ? 100.0 * s.seconds / total : 0.0, static_cast<long long>(s.calls));
      out += line;
    }
    return out;
  }

  std::string name() const override { return "profiled-" + inner_.name(); }
  std::string describe() const override { return inner_.describe() + ", profiled (every op timed, then synchronized)"; }
  int threads() const override { return inner_.threads(); }
  MemorySpace memory_space() const override { return inner_.memory_space(); }
  Buffer allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void upload(const void* host, Tensor dst) override {
    timed("upload", [&] { inner_.upload(host, dst); });
  }
  void download(Tensor src, void* host) override {
    timed("download", [&] { inner_.download(src, host); });
  }
  void copy(Tensor src, Tensor dst) override {
    timed("copy", [&] { inner_.copy(src, dst); });
  }
  void fill(Tensor t, float value) override {
    timed("fill", [&] { inner_.fill(t, value); });
  }
  void synchronize() override { inner_.synchronize(); }
  void invalidate_weight_shadows() override { inner_.invalidate_weight_shadows(); }
  void activation_import(const float* host_nhwc, Tensor dst) override {
    timed("activation_import", [&] { inner_.activation_import(host_nhwc, dst); });
  }
  void activation_export(Tensor src, float* host_nhwc) override {
    timed("activation_export", [&] { inner_.activation_export(src, host_nhwc); });
  }

  size_t conv_weight_elements(const ConvGeometry& g) override { return inner_.conv_weight_elements(g); }
  void conv_weight_import(const ConvGeometry& g, const float* host, Tensor native) override {
    inner_.conv_weight_import(g, host, native);
  }
  void conv_weight_export(const ConvGeometry& g, Tensor native, float* host) override {
    inner_.conv_weight_export(g, native, host);
  }
  void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) override {
    timed(keyed("conv_forward", g), [&] { inner_.conv_forward(g, x, w, y); });
  }
  void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    timed(keyed("conv_backward_data", g), [&] { inner_.conv_backward_data(g, dy, w, dx); });
  }
  void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) override {
    timed(keyed("conv_backward_weights", g), [&] { inner_.conv_backward_weights(g, x, dy, dw); });
  }
  size_t norm_workspace_bytes(const NormGeometry& g) override { return inner_.norm_workspace_bytes(g); }
  void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y, Tensor save_mean,
                             Tensor save_var, Tensor running_mean, Tensor running_var, float momentum,
                             Tensor workspace) override {
    timed(keyed("norm_forward_training", g), [&] {
      inner_.norm_forward_training(g, x, gamma, beta, y, save_mean, save_var, running_mean, running_var, momentum,
                                   workspace);
    });
  }
  void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean, Tensor var,
                              Tensor y) override {
    timed("norm_forward_inference", [&] { inner_.norm_forward_inference(g, x, gamma, beta, mean, var, y); });
  }
  void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                     Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    timed(keyed("norm_backward", g),
          [&] { inner_.norm_backward(g, x, dy, gamma, beta, save_mean, save_var, workspace, dx, dgamma, dbeta); });
  }
  bool has_norm_max_pool(const NormGeometry& g) override { return inner_.has_norm_max_pool(g); }
  void norm_max_pool_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y,
                                      Tensor save_mean, Tensor save_var, Tensor running_mean, Tensor running_var,
                                      float momentum) override {
    timed(keyed("norm_max_pool_forward", g), [&] {
      inner_.norm_max_pool_forward_training(g, x, gamma, beta, y, save_mean, save_var, running_mean, running_var,
                                            momentum);
    });
  }
  void norm_max_pool_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                              Tensor save_var, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    timed(keyed("norm_max_pool_backward", g),
          [&] { inner_.norm_max_pool_backward(g, x, dy, gamma, beta, save_mean, save_var, dx, dgamma, dbeta); });
  }
  bool has_norm_add_relu(const NormGeometry& g) override { return inner_.has_norm_add_relu(g); }
  void norm_add_relu_forward_training(const NormGeometry& g, Tensor x, Tensor residual, Tensor gamma, Tensor beta,
                                      Tensor y, Tensor save_mean, Tensor save_var, Tensor running_mean,
                                      Tensor running_var, float momentum, Tensor workspace) override {
    timed(keyed("norm_add_relu_forward", g), [&] {
      inner_.norm_add_relu_forward_training(g, x, residual, gamma, beta, y, save_mean, save_var, running_mean,
                                            running_var, momentum, workspace);
    });
  }
  void norm_add_relu_backward(const NormGeometry& g, Tensor x, Tensor y, Tensor dy, Tensor gamma, Tensor beta,
                              Tensor save_mean, Tensor save_var, Tensor workspace, Tensor dx, Tensor dresidual,
                              Tensor dgamma, Tensor dbeta) override {
    timed(keyed("norm_add_relu_backward", g), [&] {
      inner_.norm_add_relu_backward(g, x, y, dy, gamma, beta, save_mean, save_var, workspace, dx, dresidual, dgamma,
                                    dbeta);
    });
  }
  void relu_forward(Tensor x, Tensor y) override {
    timed("relu_forward", [&] { inner_.relu_forward(x, y); });
  }
  void relu_backward(Tensor y, Tensor dy, Tensor dx) override {
    timed("relu_backward", [&] { inner_.relu_backward(y, dy, dx); });
  }
  void add(Tensor a, Tensor b, Tensor y, Activation act) override {
    timed("add", [&] { inner_.add(a, b, y, act); });
  }
  size_t pool_workspace_bytes(const PoolGeometry& g) override { return inner_.pool_workspace_bytes(g); }
  void pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor ws) override {
    timed(keyed("pool_forward", g), [&] { inner_.pool_forward(g, x, y, ws); });
  }
  void pool_backward(const PoolGeometry& g, Tensor dy, Tensor ws, Tensor dx) override {
    timed(keyed("pool_backward", g), [&] { inner_.pool_backward(g, dy, ws, dx); });
  }
  void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) override {
    timed("linear", [&] { inner_.linear_forward(g, x, w, b, y); });
  }
  void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    timed("linear", [&] { inner_.linear_backward_data(g, dy, w, dx); });
  }
  void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) override {
    timed("linear", [&] { inner_.linear_backward_weights(g, x, dy, dw, db); });
  }
  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) override {
    double loss = 0;
    timed("softmax_cross_entropy", [&] { loss = inner_.softmax_cross_entropy(logits, labels, smoothing, dlogits); });
    return loss;
  }
  int64_t count_top_k(Tensor logits, Tensor labels, int k) override { return inner_.count_top_k(logits, labels, k); }
  void sgd_update(Tensor param, Tensor grad, Tensor momentum, const SgdHyper& h) override {
    timed("sgd_update", [&] { inner_.sgd_update(param, grad, momentum, h); });
  }
  void sgd_update_segments(Tensor params, Tensor grads, Tensor momentum, std::span<const SgdSegment> segments,
                           const SgdHyper& h) override {
    timed("sgd_update_segments", [&] { inner_.sgd_update_segments(params, grads, momentum, segments, h); });
  }
  bool supports_activations(DType dtype) const override { return inner_.supports_activations(dtype); }
  void enable_loss_scaling(const LossScaleConfig& config) override { inner_.enable_loss_scaling(config); }
  void unscale_gradients(Tensor grads) override {
    timed("unscale_gradients", [&] { inner_.unscale_gradients(grads); });
  }
  void update_loss_scale() override { inner_.update_loss_scale(); }
  LossScaleState loss_scale_state() override { return inner_.loss_scale_state(); }
  void set_loss_scale_state(const LossScaleState& state) override { inner_.set_loss_scale_state(state); }
  void softmax_cross_entropy_async(Tensor logits, Tensor labels, float smoothing, Tensor dlogits,
                                   Tensor loss) override {
    timed("softmax_cross_entropy",
          [&] { inner_.softmax_cross_entropy_async(logits, labels, smoothing, dlogits, loss); });
  }
  TrainingOffers training_offers() const override {
    TrainingOffers offers = inner_.training_offers();
    offers.capture = false;  // kNotForwarded
    return offers;
  }
  std::unique_ptr<BatchStaging> make_batch_staging(size_t image_bytes, size_t label_bytes) override {
    return inner_.make_batch_staging(image_bytes, label_bytes);
  }
  void augment(const void* images_u8, Tensor out, const AugmentSpec& spec, uint64_t first_sample) override {
    timed("augment", [&] { inner_.augment(images_u8, out, spec, first_sample); });
  }
  std::unique_ptr<CapturedStep> capture_step(const std::function<void()>& /*step*/) override { return nullptr; }

 private:
  template <typename F>
  void timed(const std::string& op, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    inner_.synchronize();
    OpStats& s = stats_[op];
    s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++s.calls;
  }

  std::string keyed(const char* op, const ConvGeometry& g) const {
    if (detail_ == ProfileDetail::kPerOp) return op;
    char k[96];
    std::snprintf(k, sizeof(k), "%s %lld>%lld %lldx%lld k%llds%lld", op, static_cast<long long>(g.c_in),
                  static_cast<long long>(g.c_out), static_cast<long long>(g.h), static_cast<long long>(g.w),
                  static_cast<long long>(g.kh), static_cast<long long>(g.stride));
    return k;
  }
  template <typename G>  // NormGeometry, PoolGeometry: (N, H, W, C) inputs
  std::string keyed(const char* op, const G& g) const {
    if (detail_ == ProfileDetail::kPerOp) return op;
    char k[96];
    std::snprintf(k, sizeof(k), "%s %lldx%lldx%lld", op, static_cast<long long>(g.h), static_cast<long long>(g.w),
                  static_cast<long long>(g.c));
    return k;
  }

  Backend& inner_;
  ProfileDetail detail_;
  std::map<std::string, OpStats> stats_;
};

}  // namespace torus::worker

#pragma once
// A Backend for CPU tests of the training loop's device paths: the CPU backend behind an interface that reports
// device memory (MemorySpace::kDevice) and, on request, offers batch staging, device augmentation and captured steps
// (what the CUDA backend offers), each done on the CPU with the checks a GPU would need.
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/kernel_math.h"

namespace torus::worker::testing {

// The CPU backend, pretending its memory is device memory. Buffers stay alive until the backend dies, so an address
// inside one is never reused by host memory and the collectives' check cannot be fooled.
//
// With `offers`, it also offers what the CUDA backend offers a training loop, done on the CPU and checked:
// - staging: two slots; stage() copies at once (the "upload"); a slot staged again while acquired (before its
//   release), acquired before it was staged, or released twice throws (what would be a race on a GPU);
// - augment: kmath::sample_augment + kmath::augmented_value, the CUDA kernel's formulas, into fp32;
// - capture: capture_step() keeps the step and runs nothing; replay() runs it, and while it runs every host wait
//   (download, synchronize, the host-returning loss, top-k) and every allocation or upload throws, as they would
//   break a CUDA Graph.
// Always: the fused BN + add + ReLU join of a ResNet block (has_norm_add_relu), composed of the inner backend's ops.
// `log` records those calls in order ("stage 0", "acquire 0", "release 0", "augment", "capture", "replay",
// "download", "update": the first sgd_update of a step).
class PretendDeviceBackend final : public Backend {
 public:
  explicit PretendDeviceBackend(TrainingOffers offers = {}) : inner_(cpu::make_cpu_backend(1)), offers_(offers) {}
  // Another backend pretending (e.g. the recording backend, which runs half activations and loss scaling).
  PretendDeviceBackend(TrainingOffers offers, std::unique_ptr<Backend> inner)
      : inner_(std::move(inner)), offers_(offers) {}
  std::vector<std::string> log;
  std::vector<AugmentSpec> augment_specs;
  std::vector<uint64_t> augment_first_samples;
  std::vector<std::vector<uint8_t>> augment_inputs;  // the u8 batches augment() was given
  // Whether [p, p + bytes) overlaps memory this backend handed out.
  bool owns(const void* p, size_t bytes) const {
    std::lock_guard lock(mu_);
    const auto* b = static_cast<const std::byte*>(p);
    for (const Buffer& buf : kept_) {
      const auto* begin = static_cast<const std::byte*>(buf.data());
      if (b < begin + buf.bytes() && begin < b + bytes) return true;
    }
    return false;
  }
  int uploads() const { return uploads_; }
  int downloads() const { return downloads_; }
  int invalidations() const { return invalidations_; }
  // Reads of the loss scale: each is a host wait for the device's queue on a GPU.
  int loss_scale_reads() const { return loss_scale_reads_; }

  std::string name() const override { return "pretend-device-" + inner_->name(); }
  int threads() const override { return inner_->threads(); }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  Buffer allocate(size_t bytes) override {
    expect_not_replaying("allocate");
    Buffer real = inner_->allocate(bytes);
    Buffer view(real.data(), real.bytes(), nullptr);  // not owning: the real one is kept
    std::lock_guard lock(mu_);
    kept_.push_back(std::move(real));
    return view;
  }
  void upload(const void* host, Tensor dst) override {
    expect_not_replaying("upload");
    ++uploads_;
    inner_->upload(host, dst);
  }
  void download(Tensor src, void* host) override {
    expect_not_replaying("download");
    log.push_back("download");
    ++downloads_;
    inner_->download(src, host);
  }
  void copy(Tensor src, Tensor dst) override { inner_->copy(src, dst); }
  void fill(Tensor t, float value) override { inner_->fill(t, value); }
  void synchronize() override {
    expect_not_replaying("synchronize");
    inner_->synchronize();
  }
  void invalidate_weight_shadows() override { ++invalidations_; }

  size_t conv_weight_elements(const ConvGeometry& g) override { return inner_->conv_weight_elements(g); }
  void conv_weight_import(const ConvGeometry& g, const float* host, Tensor native) override {
    inner_->conv_weight_import(g, host, native);
  }
  void conv_weight_export(const ConvGeometry& g, Tensor native, float* host) override {
    inner_->conv_weight_export(g, native, host);
  }
  void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) override { inner_->conv_forward(g, x, w, y); }
  void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    inner_->conv_backward_data(g, dy, w, dx);
  }
  void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) override {
    inner_->conv_backward_weights(g, x, dy, dw);
  }
  size_t norm_workspace_bytes(const NormGeometry& g) override { return inner_->norm_workspace_bytes(g); }
  void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y, Tensor save_mean,
                             Tensor save_var, Tensor running_mean, Tensor running_var, float momentum,
                             Tensor workspace) override {
    inner_->norm_forward_training(g, x, gamma, beta, y, save_mean, save_var, running_mean, running_var, momentum,
                                  workspace);
  }
  void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean, Tensor var,
                              Tensor y) override {
    inner_->norm_forward_inference(g, x, gamma, beta, mean, var, y);
  }
  void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                     Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    inner_->norm_backward(g, x, dy, gamma, beta, save_mean, save_var, workspace, dx, dgamma, dbeta);
  }
  bool has_norm_max_pool(const NormGeometry& g) override { return inner_->has_norm_max_pool(g); }
  void norm_max_pool_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y,
                                      Tensor save_mean, Tensor save_var, Tensor running_mean, Tensor running_var,
                                      float momentum) override {
    inner_->norm_max_pool_forward_training(g, x, gamma, beta, y, save_mean, save_var, running_mean, running_var,
                                           momentum);
  }
  void norm_max_pool_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                              Tensor save_var, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    inner_->norm_max_pool_backward(g, x, dy, gamma, beta, save_mean, save_var, dx, dgamma, dbeta);
  }
  // The CUDA backend's fused join of a ResNet block, relu(bn(x) + residual), composed of the inner backend's ops in
  // the layer's own two-op arithmetic (so runs stay bit for bit comparable with the host engine's); joins() counts
  // the forwards.
  bool has_norm_add_relu(const NormGeometry& /*g*/) override { return true; }
  void norm_add_relu_forward_training(const NormGeometry& g, Tensor x, Tensor residual, Tensor gamma, Tensor beta,
                                      Tensor y, Tensor save_mean, Tensor save_var, Tensor running_mean,
                                      Tensor running_var, float momentum, Tensor workspace) override {
    if (g.activation != Activation::kRelu) throw std::logic_error("norm_add_relu: the geometry's activation is kRelu");
    NormGeometry plain = g;
    plain.activation = Activation::kNone;
    inner_->norm_forward_training(plain, x, gamma, beta, y, save_mean, save_var, running_mean, running_var, momentum,
                                  workspace);
    inner_->add(y, residual, y, Activation::kRelu);
    ++joins_;
  }
  void norm_add_relu_backward(const NormGeometry& g, Tensor x, Tensor y, Tensor dy, Tensor gamma, Tensor beta,
                              Tensor save_mean, Tensor save_var, Tensor workspace, Tensor dx, Tensor dresidual,
                              Tensor dgamma, Tensor dbeta) override {
    NormGeometry plain = g;
    plain.activation = Activation::kNone;
    inner_->relu_backward(y, dy, dresidual);
    inner_->norm_backward(plain, x, dresidual, gamma, beta, save_mean, save_var, workspace, dx, dgamma, dbeta);
  }
  int joins() const { return joins_; }
  void relu_forward(Tensor x, Tensor y) override { inner_->relu_forward(x, y); }
  void relu_backward(Tensor y, Tensor dy, Tensor dx) override { inner_->relu_backward(y, dy, dx); }
  void add(Tensor a, Tensor b, Tensor y, Activation act) override { inner_->add(a, b, y, act); }
  size_t pool_workspace_bytes(const PoolGeometry& g) override { return inner_->pool_workspace_bytes(g); }
  void pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor ws) override {
    inner_->pool_forward(g, x, y, ws);
  }
  void pool_backward(const PoolGeometry& g, Tensor dy, Tensor ws, Tensor dx) override {
    inner_->pool_backward(g, dy, ws, dx);
  }
  void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) override {
    inner_->linear_forward(g, x, w, b, y);
  }
  void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    inner_->linear_backward_data(g, dy, w, dx);
  }
  void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) override {
    inner_->linear_backward_weights(g, x, dy, dw, db);
  }
  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) override {
    expect_not_replaying("softmax_cross_entropy (returns the loss on the host)");
    return inner_->softmax_cross_entropy(logits, labels, smoothing, dlogits);
  }
  void softmax_cross_entropy_async(Tensor logits, Tensor labels, float smoothing, Tensor dlogits,
                                   Tensor loss) override {
    *loss.f32() = static_cast<float>(inner_->softmax_cross_entropy(logits, labels, smoothing, dlogits));
  }
  int64_t count_top_k(Tensor logits, Tensor labels, int k) override {
    expect_not_replaying("count_top_k");
    return inner_->count_top_k(logits, labels, k);
  }
  void sgd_update(Tensor param, Tensor grad, Tensor momentum, const SgdHyper& h) override {
    if (log.empty() || log.back() != "update") log.push_back("update");
    inner_->sgd_update(param, grad, momentum, h);
  }
  bool supports_activations(DType dtype) const override { return inner_->supports_activations(dtype); }
  void enable_loss_scaling(const LossScaleConfig& config) override { inner_->enable_loss_scaling(config); }
  void unscale_gradients(Tensor grads) override { inner_->unscale_gradients(grads); }
  void update_loss_scale() override { inner_->update_loss_scale(); }
  LossScaleState loss_scale_state() override {
    expect_not_replaying("loss_scale_state (a host read)");
    ++loss_scale_reads_;
    return inner_->loss_scale_state();
  }
  void set_loss_scale_state(const LossScaleState& state) override { inner_->set_loss_scale_state(state); }

  TrainingOffers training_offers() const override { return offers_; }
  std::unique_ptr<BatchStaging> make_batch_staging(size_t image_bytes, size_t label_bytes) override;
  void augment(const void* images_u8, Tensor out, const AugmentSpec& spec, uint64_t first_sample) override;
  std::unique_ptr<CapturedStep> capture_step(const std::function<void()>& step) override;

 private:
  class Staging;
  class Captured;
  void expect_not_replaying(const char* what) const {
    if (replaying_) throw std::logic_error(std::string(what) + " inside a captured step");
  }

  std::unique_ptr<Backend> inner_;
  TrainingOffers offers_;
  bool replaying_ = false;
  mutable std::mutex mu_;
  std::vector<Buffer> kept_;
  std::atomic<int> uploads_{0}, downloads_{0}, invalidations_{0}, loss_scale_reads_{0}, joins_{0};
};

class PretendDeviceBackend::Staging final : public BatchStaging {
 public:
  Staging(PretendDeviceBackend& backend, size_t image_bytes, size_t label_bytes)
      : backend_(backend), image_bytes_(image_bytes) {
    for (Slot& s : slots_) s.memory = backend.allocate(image_bytes + label_bytes);
  }
  int stage(const void* images, size_t image_bytes, const void* labels, size_t label_bytes) override {
    const int slot = next_;
    next_ = (next_ + 1) % 2;
    Slot& s = slots_[slot];
    // A staged batch never acquired (a run that stopped with the next batch staged) may be overwritten; one the
    // backend still reads may not.
    if (s.state == State::kAcquired)
      throw std::logic_error("staging: slot " + std::to_string(slot) + " staged again before its release");
    if (image_bytes > image_bytes_) throw std::logic_error("staging: batch larger than the slots");
    auto* bytes = static_cast<std::byte*>(s.memory.data());
    std::memcpy(bytes, images, image_bytes);
    std::memcpy(bytes + image_bytes_, labels, label_bytes);
    s.state = State::kStaged;
    backend_.log.push_back("stage " + std::to_string(slot));
    return slot;
  }
  std::pair<void*, void*> acquire(int slot) override {
    Slot& s = slots_.at(static_cast<size_t>(slot));
    if (s.state != State::kStaged) throw std::logic_error("staging: slot " + std::to_string(slot) + " not staged");
    s.state = State::kAcquired;
    backend_.log.push_back("acquire " + std::to_string(slot));
    return {s.memory.data(), static_cast<std::byte*>(s.memory.data()) + image_bytes_};
  }
  void release(int slot) override {
    Slot& s = slots_.at(static_cast<size_t>(slot));
    if (s.state != State::kAcquired) throw std::logic_error("staging: slot " + std::to_string(slot) + " not acquired");
    s.state = State::kReleased;
    backend_.log.push_back("release " + std::to_string(slot));
  }
  int slots() const override { return 2; }

 private:
  enum class State : uint8_t { kReleased, kStaged, kAcquired };
  struct Slot {
    Buffer memory;
    State state = State::kReleased;
  };
  PretendDeviceBackend& backend_;
  size_t image_bytes_;
  std::array<Slot, 2> slots_;
  int next_ = 0;
};

class PretendDeviceBackend::Captured final : public CapturedStep {
 public:
  Captured(PretendDeviceBackend& backend, std::function<void()> step) : backend_(backend), step_(std::move(step)) {}
  void replay() override {
    backend_.log.push_back("replay");
    backend_.replaying_ = true;
    try {
      step_();
    } catch (...) {
      backend_.replaying_ = false;
      throw;
    }
    backend_.replaying_ = false;
  }

 private:
  PretendDeviceBackend& backend_;
  std::function<void()> step_;
};

inline std::unique_ptr<BatchStaging> PretendDeviceBackend::make_batch_staging(size_t image_bytes, size_t label_bytes) {
  if (!offers_.staging) return nullptr;
  return std::make_unique<Staging>(*this, image_bytes, label_bytes);
}

inline void PretendDeviceBackend::augment(const void* images_u8, Tensor out, const AugmentSpec& spec,
                                          uint64_t first_sample) {
  if (!offers_.augment) throw std::logic_error("augment: not offered");
  log.push_back("augment");
  const Shape& s = out.shape();
  const auto n = static_cast<int32_t>(s[0]), h = static_cast<int32_t>(s[1]), w = static_cast<int32_t>(s[2]),
             c = static_cast<int32_t>(s[3]);
  const auto* u8 = static_cast<const uint8_t*>(images_u8);
  const size_t per_image = static_cast<size_t>(h) * w * c;
  augment_specs.push_back(spec);
  augment_first_samples.push_back(first_sample);
  augment_inputs.emplace_back(u8, u8 + per_image * n);
  float* o = out.f32();
  for (int32_t i = 0; i < n; ++i) {
    const auto a = cuda::kmath::sample_augment(spec.seed, first_sample + i, spec.max_shift, spec.flip);
    for (int32_t y = 0; y < h; ++y)
      for (int32_t x = 0; x < w; ++x)
        for (int32_t ch = 0; ch < c; ++ch)
          o[i * per_image + (static_cast<size_t>(y) * w + x) * c + ch] =
              cuda::kmath::augmented_value(u8 + i * per_image, y, x, ch, h, w, c, a, spec);
  }
}

inline std::unique_ptr<CapturedStep> PretendDeviceBackend::capture_step(const std::function<void()>& step) {
  if (!offers_.capture) return nullptr;
  log.push_back("capture");
  return std::make_unique<Captured>(*this, step);
}

}  // namespace torus::worker::testing

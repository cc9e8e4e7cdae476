#pragma once
// The ops a ResNet needs, independent of where they run. Layers (worker/nn) call only this interface; the CPU
// backend implements it with oneDNN, the CUDA backend with cuDNN/cuBLAS. Every op takes a geometry struct
// (shapes and hyper-parameters, compared by value): a backend caches its primitives/plans per geometry, so
// the first call of a shape builds the plan and every later call only executes it.
//
// Layout contract: activations have the logical shape `(N, H, W, C)`, fp32 (bf16/fp16 where supports_activations
// says so), in a backend-chosen layout that depends only on the shape (dense NHWC unless the backend says otherwise:
// the CPU backend blocks wide channels) and that every op taking activations agrees on; activation_import/export
// convert from/to NHWC at the edges (tests, tools).
// An `(N, 1, 1, C)` activation is always `(N, C)` row-major, as are linear inputs; linear weights (out, in)
// row-major; BN vectors `(C)`. Conv weights are stored in a backend-native layout whose size
// conv_weight_elements() gives; conv_weight_import/export convert from/to plain (O, I, KH, KW) at the edges
// (init, checkpoint, tests). Native padding elements stay zero through training.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "worker/backend/math.h"
#include "worker/tensor/tensor.h"

namespace torus::worker {

enum class Activation : uint8_t { kNone, kRelu };
enum class PoolKind : uint8_t { kMax, kAvg };

// Output pixels along one axis of a window sliding over `in` pixels (plus `pad` each side): floor division, so a
// window longer than the padded input leaves none (C++'s division truncates toward zero: (1 - 2) / 2 + 1 would
// count one).
inline int64_t output_extent(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t span = in + 2 * pad - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

struct ConvGeometry {
  int64_t n = 0, h = 0, w = 0, c_in = 0;  // input (N, H, W, C)
  int64_t c_out = 0, kh = 0, kw = 0, stride = 1, pad = 0;
  int64_t out_h() const { return output_extent(h, kh, stride, pad); }
  int64_t out_w() const { return output_extent(w, kw, stride, pad); }
  Shape input_shape() const { return {n, h, w, c_in}; }
  Shape output_shape() const { return {n, out_h(), out_w(), c_out}; }
  Shape weight_shape() const { return {c_out, c_in, kh, kw}; }
  auto operator<=>(const ConvGeometry&) const = default;
};

struct NormGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // (N, H, W, C)
  float eps = 1e-5f;
  Activation activation = Activation::kNone;  // fused after the normalization
  Shape shape() const { return {n, h, w, c}; }
  int64_t rows() const { return n * h * w; }                       // the positions each channel is normalized over
  Shape max_pooled_shape() const { return {n, h / 2, w / 2, c}; }  // after norm_max_pool's 2x2 stride-2 pool
  auto operator<=>(const NormGeometry&) const = default;
};

struct PoolGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input (N, H, W, C)
  PoolKind kind = PoolKind::kMax;
  int64_t kh = 2, kw = 2, stride = 2, pad = 0;  // global pooling: kh = h, kw = w
  int64_t out_h() const { return output_extent(h, kh, stride, pad); }
  int64_t out_w() const { return output_extent(w, kw, stride, pad); }
  Shape input_shape() const { return {n, h, w, c}; }
  Shape output_shape() const { return {n, out_h(), out_w(), c}; }
  static PoolGeometry global(int64_t n, int64_t h, int64_t w, int64_t c, PoolKind kind) {
    return {n, h, w, c, kind, h, w, 1, 0};
  }
  auto operator<=>(const PoolGeometry&) const = default;
};

struct LinearGeometry {
  int64_t n = 0, in = 0, out = 0;  // x (N, in), w (out, in), b (out), y (N, out)
  auto operator<=>(const LinearGeometry&) const = default;
};

// Where a backend's memory lives. kHost: a Buffer's bytes are ordinary host memory, so spans of arenas may go to
// host-side collectives directly. kDevice: they are not host-addressable; move them with download/upload (or hand
// them to a device-capable collective) instead.
enum class MemorySpace : uint8_t { kHost, kDevice };

// Dynamic loss scaling (fp16): the state machine's knobs and state (math.h; cuda/kernel_math.h runs the formula, on
// host and device alike).
using LossScaleConfig = math::LossScaleConfig;
using LossScaleState = math::LossScaleState;

// Device-side augmentation (cropPadding, flip, normalization): cuda/kernel_math.h's formula, on host and device alike.
using AugmentSpec = math::AugmentSpec;

struct SgdHyper {
  float lr = 0, momentum = 0, weight_decay = 0;
  math::Nesterov nesterov = math::Nesterov::kOff;
  // When not empty: one fp32 in backend memory that the update reads when it runs, instead of `lr`. A captured step
  // (Backend::capture_step) replays its kernels' arguments as captured; the learning rate of a schedule reaches it
  // through this value, written (fill) before each replay.
  Tensor lr_value;
  float lr_now() const { return lr_value.empty() ? lr : *lr_value.f32(); }  // host memory only (CPU backends)
};

// A tensor of an arena for the fused optimizer update (offset and elements in the arena, its weight decay).
using SgdSegment = math::SgdSegment;

// Pinned host slots whose upload to backend memory overlaps the compute of the previous step (a device backend's
// offer; see Backend::make_batch_staging). stage() copies into the next slot and starts its upload; acquire() orders
// the backend's work after that upload (no host wait) and returns the slot's images and labels; release() marks the
// end of the backend's use (the slot's next upload waits for it). A slot is reused after slots() - 1 others.
class BatchStaging {
 public:
  virtual ~BatchStaging() = default;
  virtual int stage(const void* images, size_t image_bytes, const void* labels, size_t label_bytes) = 0;
  virtual std::pair<void*, void*> acquire(int slot) = 0;
  virtual void release(int slot) = 0;
  virtual int slots() const = 0;
};

// What a backend offers a training loop beyond the ops (a device backend's input pipeline and captured steps).
struct TrainingOffers {
  bool staging = false;  // make_batch_staging
  bool augment = false;  // augment
  bool capture = false;  // capture_step
};

// A step recorded once and replayed with one launch (CUDA Graph). Recording executes nothing: replay() runs it.
class CapturedStep {
 public:
  virtual ~CapturedStep() = default;
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int threads() const = 0;
  virtual MemorySpace memory_space() const = 0;
  // What this backend runs with, as rank 0's effective configuration shows it: "cpu-onednn, host memory, 2 thread(s),
  // activations f32". Told by the backend, so the log cannot say more than what computes.
  virtual std::string describe() const {
    std::string activations;
    for (DType d : {DType::kF32, DType::kBF16, DType::kF16})
      if (supports_activations(d)) activations += std::string(activations.empty() ? "" : "/") + dtype_name(d);
    return name() + (memory_space() == MemorySpace::kHost ? ", host memory, " : ", device memory, ") +
           std::to_string(threads()) + " thread(s), activations " + activations;
  }

  // --- memory -----------------------------------------------------------------------------------------
  virtual Buffer allocate(size_t bytes) = 0;  // zero-filled, backend memory
  virtual void upload(const void* host, Tensor dst) = 0;
  virtual void download(Tensor src, void* host) = 0;
  virtual void copy(Tensor src, Tensor dst) = 0;
  virtual void fill(Tensor t, float value) = 0;
  virtual void synchronize() = 0;
  // Parameters were written behind the backend's back (a collective into the parameter arena): drop whatever the
  // backend derived from them (the CUDA backend's half-precision weight shadows). Nothing to do for most backends.
  virtual void invalidate_weight_shadows() {}
  // An activation (N, H, W, C) from/to dense NHWC on the host. The default: the backend keeps NHWC.
  virtual void activation_import(const float* host_nhwc, Tensor dst) { upload(host_nhwc, dst); }
  virtual void activation_export(Tensor src, float* host_nhwc) { download(src, host_nhwc); }

  // --- convolution (no bias: every ResNet conv is followed by BN) -----------------------------------
  // Elements a weight of this conv occupies in the native layout; fixes that layout for this geometry's
  // weight shape (later geometries of other batch/image sizes convert internally only if they must).
  virtual size_t conv_weight_elements(const ConvGeometry& g) = 0;
  virtual void conv_weight_import(const ConvGeometry& g, const float* host_oihw, Tensor native) = 0;
  virtual void conv_weight_export(const ConvGeometry& g, Tensor native, float* host_oihw) = 0;
  virtual void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) = 0;
  virtual void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) = 0;
  virtual void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) = 0;

  // --- batch norm (with the activation in the geometry fused) ---------------------------------------
  // Bytes of the training-forward workspace the backward needs (fused ReLU mask); may be 0.
  virtual size_t norm_workspace_bytes(const NormGeometry& g) = 0;
  // Normalizes with batch statistics; saves mean and biased variance (C) for backward and updates the
  // running mean / unbiased variance with `momentum`.
  virtual void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y,
                                     Tensor save_mean, Tensor save_var, Tensor running_mean, Tensor running_var,
                                     float momentum, Tensor workspace) = 0;
  virtual void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean,
                                      Tensor var, Tensor y) = 0;
  // dy is the gradient of the (activated) output; writes dx, dgamma, dbeta.
  virtual void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                             Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) = 0;

  // --- batch norm straight into a 2x2 stride-2 max pool (optional) -------------------------------------
  // The two ops in one, never storing the normalized tensor (the narrow ResNet-9's conv -> BN + ReLU -> pool
  // blocks; its memory traffic, not its arithmetic, is what they cost on a CPU). Forward: batch statistics as
  // norm_forward_training (saved and running), then y (N, H/2, W/2, C) = the max of each window of the activated
  // normalization. Backward: dy is the pool's output gradient; each window's winner (ties to the first in row
  // order) and its activation mask are recomputed from x, so there is no workspace. Where has_norm_max_pool says
  // no, the layer runs the two ops (the defaults throw).
  virtual bool has_norm_max_pool(const NormGeometry& /*g*/) { return false; }
  virtual void norm_max_pool_forward_training(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*gamma*/,
                                              Tensor /*beta*/, Tensor /*y*/, Tensor /*save_mean*/, Tensor /*save_var*/,
                                              Tensor /*running_mean*/, Tensor /*running_var*/, float /*momentum*/) {
    throw std::logic_error(name() + " backend: norm_max_pool_forward_training() is not offered");
  }
  virtual void norm_max_pool_backward(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*dy*/, Tensor /*gamma*/,
                                      Tensor /*beta*/, Tensor /*save_mean*/, Tensor /*save_var*/, Tensor /*dx*/,
                                      Tensor /*dgamma*/, Tensor /*dbeta*/) {
    throw std::logic_error(name() + " backend: norm_max_pool_backward() is not offered");
  }

  // --- batch norm, residual add and ReLU in one (optional) ---------------------------------------------
  // The join of a ResNet block, y = relu(bn(x) + residual), in the normalize pass: the sum is never stored apart and
  // the ReLU's mask is what the backward reads (memory-bound passes a GPU step spends most of its element-wise time
  // in). g.activation is kRelu (the ReLU after the add); the workspace is norm_workspace_bytes(g). Forward: batch
  // statistics as norm_forward_training (saved and running). Backward: dy is y's gradient; writes dresidual (dy where
  // y > 0), dx (through the normalization) and dgamma, dbeta; y is the forward's output. Where has_norm_add_relu says
  // no, the layer runs batch norm, then add() with the ReLU (the defaults throw).
  virtual bool has_norm_add_relu(const NormGeometry& /*g*/) { return false; }
  virtual void norm_add_relu_forward_training(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*residual*/,
                                              Tensor /*gamma*/, Tensor /*beta*/, Tensor /*y*/, Tensor /*save_mean*/,
                                              Tensor /*save_var*/, Tensor /*running_mean*/, Tensor /*running_var*/,
                                              float /*momentum*/, Tensor /*workspace*/) {
    throw std::logic_error(name() + " backend: norm_add_relu_forward_training() is not offered");
  }
  virtual void norm_add_relu_backward(const NormGeometry& /*g*/, Tensor /*x*/, Tensor /*y*/, Tensor /*dy*/,
                                      Tensor /*gamma*/, Tensor /*beta*/, Tensor /*save_mean*/, Tensor /*save_var*/,
                                      Tensor /*workspace*/, Tensor /*dx*/, Tensor /*dresidual*/, Tensor /*dgamma*/,
                                      Tensor /*dbeta*/) {
    throw std::logic_error(name() + " backend: norm_add_relu_backward() is not offered");
  }

  // --- elementwise ---------------------------------------------------------------------------------
  virtual void relu_forward(Tensor x, Tensor y) = 0;
  // Gradient through a ReLU whose output was y.
  virtual void relu_backward(Tensor y, Tensor dy, Tensor dx) = 0;
  // y = act(a + b): the residual join.
  virtual void add(Tensor a, Tensor b, Tensor y, Activation act) = 0;

  // --- pooling -------------------------------------------------------------------------------------
  virtual size_t pool_workspace_bytes(const PoolGeometry& g) = 0;
  virtual void pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor workspace) = 0;
  virtual void pool_backward(const PoolGeometry& g, Tensor dy, Tensor workspace, Tensor dx) = 0;

  // --- linear --------------------------------------------------------------------------------------
  virtual void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) = 0;
  virtual void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) = 0;
  virtual void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) = 0;

  // --- loss and metrics ----------------------------------------------------------------------------
  // Mean label-smoothed softmax cross-entropy of logits (N, K) against int32 labels (N); writes dlogits
  // (the gradient of that mean) unless it is empty. Returns the loss on the host.
  virtual double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) = 0;
  // Samples whose label is among the k largest logits.
  virtual int64_t count_top_k(Tensor logits, Tensor labels, int k) = 0;

  // --- optimizer -----------------------------------------------------------------------------------
  // Skips the update (momentum untouched) when loss scaling is on and this step's unscale found inf/NaN.
  virtual void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h) = 0;
  // The update of many tensors at once: `params`, `grads` and `momentum` are whole arenas of one layout, `segments`
  // their tensors (each with its weight decay; h.weight_decay is not used). The default: sgd_update per segment. The
  // CUDA backend: one launch (kmath::sgd_chunks).
  virtual void sgd_update_segments(Tensor params, Tensor grads, Tensor momentum, std::span<const SgdSegment> segments,
                                   const SgdHyper& h) {
    for (const SgdSegment& s : segments) {
      SgdHyper one = h;
      one.weight_decay = s.weight_decay;
      auto part = [&s](Tensor all) { return Tensor(all.f32() + s.offset, {s.elements}); };
      sgd_update(part(params), part(grads), part(momentum), one);
    }
  }

  // --- mixed precision (spec.training.precision) ---------------------------------------------------
  // Whether layer outputs and input gradients of `dtype` run here. Parameters, gradients, optimizer state and BN
  // statistics stay fp32 whatever it is. The trainer refuses a precision whose dtype is not supported, so a job never
  // trains in another precision than it asked for.
  virtual bool supports_activations(DType dtype) const = 0;
  // Dynamic loss scaling for fp16. Once enabled: softmax_cross_entropy scales dlogits by the current scale;
  // unscale_gradients(grads) divides them back and flags inf/NaN (call it after the all-reduce, so every rank sees the
  // same flag); sgd_update skips a flagged step; update_loss_scale() ends the step (kmath::loss_scale_update).
  // A backend without half precision throws InvalidArgument from each.
  virtual void enable_loss_scaling(const LossScaleConfig& config) = 0;
  virtual void unscale_gradients(Tensor grads) = 0;
  virtual void update_loss_scale() = 0;
  // The scale, finite-step count and skipped steps now (a device backend waits for its queue); for metrics and
  // checkpoints. set_loss_scale_state restores one (a resumed run continues with the scale it had).
  virtual LossScaleState loss_scale_state() = 0;
  virtual void set_loss_scale_state(const LossScaleState& state) = 0;

  // --- what a device backend offers the training loop (the defaults: nothing) ------------------------------
  // The loss written to `loss` (1 fp32 in backend memory) without a host wait; the default waits (the host op).
  virtual void softmax_cross_entropy_async(Tensor logits, Tensor labels, float smoothing, Tensor dlogits, Tensor loss) {
    const float value = static_cast<float>(softmax_cross_entropy(logits, labels, smoothing, dlogits));
    upload(&value, loss);
  }
  // Which of the three below this backend implements.
  virtual TrainingOffers training_offers() const { return {}; }
  // Staging for batches of at most these sizes (offers.staging; null otherwise).
  virtual std::unique_ptr<BatchStaging> make_batch_staging(size_t /*image_bytes*/, size_t /*label_bytes*/) {
    return nullptr;
  }
  // u8 images (N, H, W, C) in backend memory -> `out` (same shape, its dtype), sample i drawing its translation and
  // flip from (spec.seed, first_sample + i) (kmath::sample_augment, kmath::augmented_value). offers.augment.
  virtual void augment(const void* /*images_u8*/, Tensor /*out*/, const AugmentSpec& /*spec*/,
                       uint64_t /*first_sample*/) {
    throw std::logic_error(name() + " backend: augment() is not offered");
  }
  // Records what `step` enqueues (it must neither allocate nor wait for the device: run it eagerly once first) and
  // returns it for replay (offers.capture; null otherwise). The step's tensors must keep their addresses.
  virtual std::unique_ptr<CapturedStep> capture_step(const std::function<void()>& /*step*/) { return nullptr; }
};

}  // namespace torus::worker

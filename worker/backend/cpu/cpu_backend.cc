#include "worker/backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "common/log/log.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "common/util/tunables.h"
#include "worker/backend/cpu/batch_norm.h"
#include "worker/backend/cpu/host_ops.h"
#include "worker/backend/cpu/impl_choice.h"
#include "worker/backend/cpu/max_pool.h"
#include "worker/backend/cpu/narrow_conv.h"
#include "worker/backend/cpu/plans.h"
#include "worker/backend/cpu/small_conv.h"
#include "worker/backend/cpu/staging.h"
#include "worker/backend/cpu/winograd.h"

namespace torus::worker::cpu {
namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

void expect_bytes(Tensor t, size_t bytes, const char* what) {
  if (t.bytes() < bytes)
    throw InvalidArgument(std::string("cpu backend: ") + what + " has " + std::to_string(t.bytes()) +
                          " bytes, expected " + std::to_string(bytes));
}

// Conv weight layouts are fixed per weight shape and conv hyper-parameters, not per batch or image size.
ConvGeometry weight_key(ConvGeometry g) {
  g.n = g.h = g.w = 0;
  return g;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, ConvAlgorithm conv_algorithm)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), threads_(threads), conv_algorithm_(conv_algorithm) {
    omp_set_num_threads(threads_);
    TLOG(Info) << "cpu backend: oneDNN " << dnnl_version()->major << "." << dnnl_version()->minor << "."
               << dnnl_version()->patch << ", " << threads_ << " threads, 3x3 stride-1 convolutions "
               << (conv_algorithm_ == ConvAlgorithm::kDirect ? "direct (TORUS_CPU_WINOGRAD=0)"
                                                             : "Winograd where oneDNN has it");
  }

  std::string name() const override { return "cpu-onednn"; }
  int threads() const override { return threads_; }
  MemorySpace memory_space() const override { return MemorySpace::kHost; }

  Buffer allocate(size_t bytes) override { return allocate_host(bytes); }
  void upload(const void* host, Tensor dst) override { std::memcpy(dst.data(), host, dst.bytes()); }
  void download(Tensor src, void* host) override { std::memcpy(host, src.data(), src.bytes()); }
  void copy(Tensor src, Tensor dst) override {
    expect_elements(dst, src.numel(), "copy destination");
    std::memcpy(dst.data(), src.data(), src.bytes());
  }
  void fill(Tensor t, float value) override { std::fill_n(t.f32(), t.numel(), value); }
  void synchronize() override { stream_.wait(); }

  void activation_import(const float* host_nhwc, Tensor dst) override {
    convert_activation(dst.shape(), const_cast<float*>(host_nhwc), StageDirection::kIn, dst.f32());
  }
  void activation_export(Tensor src, float* host_nhwc) override {
    convert_activation(src.shape(), src.f32(), StageDirection::kOut, host_nhwc);
  }

  // --- convolution ---------------------------------------------------------------------------------
  size_t conv_weight_elements(const ConvGeometry& g) override { return native_weight(g).get_size() / sizeof(float); }

  void conv_weight_import(const ConvGeometry& g, const float* host_oihw, Tensor native) override {
    memory::desc md = native_weight(g);
    expect_elements(native, static_cast<int64_t>(md.get_size() / sizeof(float)), "conv weight (native)");
    memory plain(plain_weight(g), engine_, const_cast<float*>(host_oihw));
    memory dst(md, engine_, native.data());
    dnnl::reorder(plain, dst).execute(stream_, plain, dst);
    stream_.wait();
  }

  void conv_weight_export(const ConvGeometry& g, Tensor native, float* host_oihw) override {
    memory::desc md = native_weight(g);
    expect_elements(native, static_cast<int64_t>(md.get_size() / sizeof(float)), "conv weight (native)");
    memory src(md, engine_, native.data());
    memory plain(plain_weight(g), engine_, host_oihw);
    dnnl::reorder(src, plain).execute(stream_, src, plain);
    stream_.wait();
  }

  void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) override {
    expect_elements(x, g.input_shape().numel(), "conv input");
    expect_elements(y, g.output_shape().numel(), "conv output");
    if (narrow_conv_by_hand(g)) return narrow_conv_forward(g, x.f32(), w.f32(), y.f32());
    if (winograd_by_hand(g) && hwio_weights(g)) return winograd_forward(g, x.f32(), w.f32(), y.f32());
    ConvPlan& p = conv_plan(g);
    memory wmem = weights_in(p.fwd_w, native_weight(g), w);
    memory xm = p.x_in.in(engine_, stream_, x, stage(stage_a_, p.x_in.bytes()));
    memory ym = p.y_out.out(engine_, y, stage(stage_b_, p.y_out.bytes()));
    p.fwd.execute(stream_, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DST, ym}});
    p.y_out.finish(engine_, stream_, ym, y);
  }

  void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    expect_elements(dy, g.output_shape().numel(), "conv output gradient");
    expect_elements(dx, g.input_shape().numel(), "conv input gradient");
    if (narrow_conv_backward_data_by_hand(g)) return narrow_conv_backward_data(g, dy.f32(), w.f32(), dx.f32());
    if (winograd_by_hand(g) && hwio_weights(g)) return winograd_backward_data(g, dy.f32(), w.f32(), dx.f32());
    ConvBackward& p = conv_backward_plan(g);
    memory wmem = weights_in(p.bwd_data_w, native_weight(g), w);
    memory dym = p.dy_in.in(engine_, stream_, dy, stage(stage_a_, p.dy_in.bytes()));
    memory dxm = p.dx_out.out(engine_, dx, stage(stage_b_, p.dx_out.bytes()));
    p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wmem}, {DNNL_ARG_DIFF_SRC, dxm}});
    p.dx_out.finish(engine_, stream_, dxm, dx);
  }

  void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) override {
    expect_elements(x, g.input_shape().numel(), "conv input");
    expect_elements(dy, g.output_shape().numel(), "conv output gradient");
    if (winograd_backward_weights_by_hand(g) && hwio_weights(g))
      return winograd_backward_weights(g, x.f32(), dy.f32(), dw.f32());
    if (small_conv_weights_by_hand(g)) return small_backward_weights(g, x, dy, dw);
    ConvBackward& p = conv_backward_plan(g);
    memory::desc native = native_weight(g);
    memory dst(native, engine_, dw.data());
    memory target = p.bwd_w_dw ? memory(p.bwd_w_pd.diff_weights_desc(), engine_, p.bwd_w_dw->scratch.data()) : dst;
    memory xm = p.w_x_in.in(engine_, stream_, x, stage(stage_a_, p.w_x_in.bytes()));
    memory dym = p.w_dy_in.in(engine_, stream_, dy, stage(stage_b_, p.w_dy_in.bytes()));
    p.bwd_w.execute(stream_, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, target}});
    if (p.bwd_w_dw) p.bwd_w_dw->prim.execute(stream_, target, dst);
  }

  // --- batch norm ----------------------------------------------------------------------------------
  size_t norm_workspace_bytes(const NormGeometry& g) override {
    if (g.activation != Activation::kRelu || batch_norm_by_hand(g)) return 0;  // batch_norm.h recomputes the mask
    return norm_training(g).train_pd.workspace_desc().get_size();
  }

  void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y, Tensor save_mean,
                             Tensor save_var, Tensor running_mean, Tensor running_var, float momentum,
                             Tensor workspace) override {
    expect_elements(x, g.shape().numel(), "batch norm input");
    expect_elements(y, g.shape().numel(), "batch norm output");
    if (batch_norm_by_hand(g)) {
      batch_norm_forward_training(g, x.f32(), gamma.f32(), beta.f32(), y.f32(), save_mean.f32(), save_var.f32());
      return update_running(g, save_mean, save_var, running_mean, running_var, momentum);
    }
    NormTraining& p = norm_training(g);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, mem(p.train_pd.src_desc(), x)},
                                            {DNNL_ARG_DST, mem(p.train_pd.dst_desc(), y)},
                                            {DNNL_ARG_SCALE, mem(flat_desc(g.c), gamma)},
                                            {DNNL_ARG_SHIFT, mem(flat_desc(g.c), beta)},
                                            {DNNL_ARG_MEAN, mem(p.train_pd.mean_desc(), save_mean)},
                                            {DNNL_ARG_VARIANCE, mem(p.train_pd.variance_desc(), save_var)}};
    if (g.activation == Activation::kRelu) args[DNNL_ARG_WORKSPACE] = mem(p.train_pd.workspace_desc(), workspace);
    p.train.execute(stream_, args);
    update_running(g, save_mean, save_var, running_mean, running_var, momentum);
  }

  void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean, Tensor var,
                              Tensor y) override {
    dnnl::batch_normalization_forward& infer = norm_inference(g);
    expect_elements(x, g.shape().numel(), "batch norm input");
    const memory::desc md = activation_desc(g.n, g.h, g.w, g.c);
    infer.execute(stream_, {{DNNL_ARG_SRC, mem(md, x)},
                            {DNNL_ARG_DST, mem(md, y)},
                            {DNNL_ARG_SCALE, mem(flat_desc(g.c), gamma)},
                            {DNNL_ARG_SHIFT, mem(flat_desc(g.c), beta)},
                            {DNNL_ARG_MEAN, mem(flat_desc(g.c), mean)},
                            {DNNL_ARG_VARIANCE, mem(flat_desc(g.c), var)}});
  }

  bool has_norm_max_pool(const NormGeometry& g) override { return batch_norm_max_pool_by_hand(g); }
  static void expect_norm_max_pool(const NormGeometry& g) {
    if (!batch_norm_max_pool_by_hand(g))
      throw InvalidArgument("cpu backend: batch norm + max pool of " + g.shape().str() +
                            " is not offered (has_norm_max_pool: NHWC of at most 32 channels, at least 2x2)");
  }

  void norm_max_pool_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y,
                                      Tensor save_mean, Tensor save_var, Tensor running_mean, Tensor running_var,
                                      float momentum) override {
    expect_norm_max_pool(g);
    expect_elements(x, g.shape().numel(), "batch norm input");
    expect_elements(y, g.max_pooled_shape().numel(), "batch norm + max pool output");
    batch_norm_max_pool_forward_training(g, x.f32(), gamma.f32(), beta.f32(), y.f32(), save_mean.f32(), save_var.f32());
    update_running(g, save_mean, save_var, running_mean, running_var, momentum);
  }

  void norm_max_pool_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                              Tensor save_var, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    expect_norm_max_pool(g);
    expect_elements(dy, g.max_pooled_shape().numel(), "batch norm + max pool output gradient");
    expect_elements(dx, g.shape().numel(), "batch norm input gradient");
    batch_norm_max_pool_backward(g, x.f32(), dy.f32(), gamma.f32(), beta.f32(), save_mean.f32(), save_var.f32(),
                                 dx.f32(), dgamma.f32(), dbeta.f32());
  }

  void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                     Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    expect_elements(dy, g.shape().numel(), "batch norm output gradient");
    expect_elements(dx, g.shape().numel(), "batch norm input gradient");
    if (batch_norm_by_hand(g))
      return batch_norm_backward(g, x.f32(), dy.f32(), gamma.f32(), beta.f32(), save_mean.f32(), save_var.f32(),
                                 dx.f32(), dgamma.f32(), dbeta.f32());
    NormTraining& p = norm_training(g);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, mem(p.bwd_pd.src_desc(), x)},
                                            {DNNL_ARG_DIFF_DST, mem(p.bwd_pd.diff_dst_desc(), dy)},
                                            {DNNL_ARG_SCALE, mem(flat_desc(g.c), gamma)},
                                            {DNNL_ARG_SHIFT, mem(flat_desc(g.c), beta)},
                                            {DNNL_ARG_MEAN, mem(flat_desc(g.c), save_mean)},
                                            {DNNL_ARG_VARIANCE, mem(flat_desc(g.c), save_var)},
                                            {DNNL_ARG_DIFF_SRC, mem(p.bwd_pd.diff_src_desc(), dx)},
                                            {DNNL_ARG_DIFF_SCALE, mem(flat_desc(g.c), dgamma)},
                                            {DNNL_ARG_DIFF_SHIFT, mem(flat_desc(g.c), dbeta)}};
#if DNNL_VERSION_MAJOR >= 3
    args.erase(DNNL_ARG_SHIFT);  // 2.6 wants the shift in the backward too; 3.x refuses an argument it does not read
#endif
    if (g.activation == Activation::kRelu) args[DNNL_ARG_WORKSPACE] = mem(p.train_pd.workspace_desc(), workspace);
    p.bwd.execute(stream_, args);
  }

  // --- elementwise ---------------------------------------------------------------------------------
  void relu_forward(Tensor x, Tensor y) override {
    expect_elements(y, x.numel(), "relu output");
    EltwisePlan& p = relu_plan(x.numel());
    p.fwd.execute(stream_,
                  {{DNNL_ARG_SRC, mem(flat_desc(x.numel()), x)}, {DNNL_ARG_DST, mem(flat_desc(x.numel()), y)}});
  }

  void relu_backward(Tensor y, Tensor dy, Tensor dx) override {
    expect_elements(dy, y.numel(), "relu output gradient");
    expect_elements(dx, y.numel(), "relu input gradient");
    EltwisePlan& p = relu_plan(y.numel());
    memory::desc md = flat_desc(y.numel());
    p.bwd.execute(stream_,
                  {{DNNL_ARG_DST, mem(md, y)}, {DNNL_ARG_DIFF_DST, mem(md, dy)}, {DNNL_ARG_DIFF_SRC, mem(md, dx)}});
  }

  void add(Tensor a, Tensor b, Tensor y, Activation act) override {
    expect_elements(b, a.numel(), "add operand");
    expect_elements(y, a.numel(), "add output");
    dnnl::binary& p = add_plan(a.numel(), act);
    memory::desc md = flat_desc(a.numel());
    p.execute(stream_, {{DNNL_ARG_SRC_0, mem(md, a)}, {DNNL_ARG_SRC_1, mem(md, b)}, {DNNL_ARG_DST, mem(md, y)}});
  }

  // --- pooling -------------------------------------------------------------------------------------
  size_t pool_workspace_bytes(const PoolGeometry& logical) override {
    const PoolGeometry g = blocked_pool_geometry(logical);
    if (max_pool_by_hand(g)) return max_pool_workspace_bytes(g);
    return g.kind == PoolKind::kMax ? pool_plan(g).fwd_pd.workspace_desc().get_size() : 0;
  }

  void pool_forward(const PoolGeometry& logical, Tensor x, Tensor y, Tensor workspace) override {
    const PoolGeometry g = blocked_pool_geometry(logical);
    expect_elements(x, g.input_shape().numel(), "pool input");
    expect_elements(y, g.output_shape().numel(), "pool output");
    if (max_pool_by_hand(g)) {
      expect_bytes(workspace, max_pool_workspace_bytes(g), "max pool workspace");
      return max_pool_forward(g, x.f32(), y.f32(), static_cast<uint8_t*>(workspace.data()));
    }
    PoolPlan& p = pool_plan(g);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, mem(p.fwd_pd.src_desc(), x)},
                                            {DNNL_ARG_DST, mem(p.fwd_pd.dst_desc(), y)}};
    if (g.kind == PoolKind::kMax) args[DNNL_ARG_WORKSPACE] = mem(p.fwd_pd.workspace_desc(), workspace);
    p.fwd.execute(stream_, args);
  }

  void pool_backward(const PoolGeometry& logical, Tensor dy, Tensor workspace, Tensor dx) override {
    const PoolGeometry g = blocked_pool_geometry(logical);
    expect_elements(dy, g.output_shape().numel(), "pool output gradient");
    expect_elements(dx, g.input_shape().numel(), "pool input gradient");
    if (max_pool_by_hand(g)) {
      expect_bytes(workspace, max_pool_workspace_bytes(g), "max pool workspace");
      return max_pool_backward(g, dy.f32(), static_cast<const uint8_t*>(workspace.data()), dx.f32());
    }
    PoolPlan& p = pool_plan(g);
    std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, mem(p.bwd_pd.diff_dst_desc(), dy)},
                                            {DNNL_ARG_DIFF_SRC, mem(p.bwd_pd.diff_src_desc(), dx)}};
    if (g.kind == PoolKind::kMax) args[DNNL_ARG_WORKSPACE] = mem(p.fwd_pd.workspace_desc(), workspace);
    p.bwd.execute(stream_, args);
  }

  // --- linear --------------------------------------------------------------------------------------
  void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) override {
    LinearPlan& p = linear_plan(g);
    expect_elements(x, g.n * g.in, "linear input");
    expect_elements(y, g.n * g.out, "linear output");
    p.fwd.execute(stream_, {{DNNL_ARG_SRC, mem(p.fwd_pd.src_desc(), x)},
                            {DNNL_ARG_WEIGHTS, mem(p.fwd_pd.weights_desc(), w)},
                            {DNNL_ARG_BIAS, mem(p.fwd_pd.bias_desc(), b)},
                            {DNNL_ARG_DST, mem(p.fwd_pd.dst_desc(), y)}});
  }

  void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    LinearPlan& p = linear_plan(g);
    p.bwd_data.execute(stream_, {{DNNL_ARG_DIFF_DST, mem(p.bwd_data_pd.diff_dst_desc(), dy)},
                                 {DNNL_ARG_WEIGHTS, mem(p.bwd_data_pd.weights_desc(), w)},
                                 {DNNL_ARG_DIFF_SRC, mem(p.bwd_data_pd.diff_src_desc(), dx)}});
  }

  void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) override {
    LinearPlan& p = linear_plan(g);
    p.bwd_w.execute(stream_, {{DNNL_ARG_SRC, mem(p.bwd_w_pd.src_desc(), x)},
                              {DNNL_ARG_DIFF_DST, mem(p.bwd_w_pd.diff_dst_desc(), dy)},
                              {DNNL_ARG_DIFF_WEIGHTS, mem(p.bwd_w_pd.diff_weights_desc(), dw)},
                              {DNNL_ARG_DIFF_BIAS, mem(p.bwd_w_pd.diff_bias_desc(), db)}});
  }

  // --- loss, metrics and the optimizer step (host_ops.cc) --------------------------------------------
  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) override {
    return cpu::softmax_cross_entropy(logits, labels, smoothing, dlogits);
  }
  int64_t count_top_k(Tensor logits, Tensor labels, int k) override { return cpu::count_top_k(logits, labels, k); }
  void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h) override {
    cpu::sgd_update(param, grad, momentum_buffer, h);
  }

  // --- mixed precision: none. Validation refuses bf16/fp16 on the CPU engine; these refuse a caller that got past
  // it, so a half-precision run never trains in fp32 unannounced.
  bool supports_activations(DType dtype) const override { return dtype == DType::kF32; }
  void enable_loss_scaling(const LossScaleConfig& /*config*/) override { refuse_half("loss scaling"); }
  void unscale_gradients(Tensor /*grads*/) override { refuse_half("unscale_gradients"); }
  void update_loss_scale() override { refuse_half("update_loss_scale"); }
  LossScaleState loss_scale_state() override { refuse_half("loss_scale_state"); }
  void set_loss_scale_state(const LossScaleState& /*state*/) override { refuse_half("set_loss_scale_state"); }

 private:
  memory mem(const memory::desc& md, Tensor t) const { return memory(md, engine_, t.data()); }

  [[noreturn]] static void refuse_half(const char* what) {
    throw InvalidArgument(std::string("cpu backend: ") + what +
                          " belongs to fp16 training, and the CPU engine trains in fp32 only (training.precision)");
  }

  // A staging buffer of at least `bytes` (nullptr for none), grown and kept for the backend's life.
  static void* stage(Buffer& buffer, size_t bytes) {
    if (bytes == 0) return nullptr;
    if (buffer.data() == nullptr || buffer.bytes() < bytes) buffer = allocate_host(bytes);
    return buffer.data();
  }

  // Between NHWC on the host and the activation's own layout (a copy when they are the same).
  void convert_activation(const Shape& s, float* from, StageDirection direction, float* to) {
    if (s.rank() != 4 || !blocked_channels(s[3])) {
      std::memcpy(to, from, static_cast<size_t>(s.numel()) * sizeof(float));
      return;
    }
    const memory::desc plain = nhwc_desc(s[0], s[1], s[2], s[3]), own = activation_desc(s[0], s[1], s[2], s[3]);
    const bool in = direction == StageDirection::kIn;
    memory a(in ? plain : own, engine_, from), b(in ? own : plain, engine_, to);
    dnnl::reorder(a, b).execute(stream_, a, b);
    stream_.wait();
  }

  static memory::desc plain_weight(const ConvGeometry& g) {
    return memory::desc({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, tag::oihw);
  }

  // The layout this conv's weights live in: whatever the forward primitive picks for the first geometry.
  memory::desc native_weight(const ConvGeometry& g) {
    ConvGeometry key = weight_key(g);
    auto it = native_weights_.find(key);
    if (it != native_weights_.end()) return it->second;
    // The hand-written forward's layout (narrow_conv.h, winograd.h) where it runs, else the forward primitive's.
    const bool by_hand = narrow_conv_by_hand(g) || winograd_by_hand(g);
    memory::desc md = by_hand ? hwio_weight(g) : conv_plan(g).fwd_pd.weights_desc();
    native_weights_.emplace(key, md);
    return md;
  }
  static memory::desc hwio_weight(const ConvGeometry& g) {
    return memory::desc({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, tag::hwio);
  }
  // Whether g's weights live as the hand-written kernels read them. The layout is chosen for the first geometry of a
  // weight shape, and Winograd's side rule can differ between two geometries of one shape (laid out at 6x6 on
  // oneDNN, evaluated at 7x7): such a geometry stays on oneDNN, which converts.
  bool hwio_weights(const ConvGeometry& g) { return native_weight(g) == hwio_weight(g); }

  // small_conv.h's backward weights writes hwio: into dw itself, or, where the weights live as the forward primitive
  // laid them out, into a buffer converted into dw.
  void small_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) {
    const memory::desc native = native_weight(g);
    if (native == hwio_weight(g)) return small_conv_backward_weights(g, x.f32(), dy.f32(), dw.f32());
    std::optional<Converter>& c = hwio_to_native_[weight_key(g)];
    if (!c) c = converter(hwio_weight(g), native);
    small_conv_backward_weights(g, x.f32(), dy.f32(), static_cast<float*>(c->scratch.data()));
    memory hwio(c->from, engine_, c->scratch.data()), own(native, engine_, dw.data());
    c->prim.execute(stream_, hwio, own);
  }

  // The weights as the primitive wants them: the native memory itself, or a converted copy.
  memory weights_in(std::optional<Converter>& conv, const memory::desc& native, Tensor w) {
    memory src(native, engine_, w.data());
    if (!conv) return src;
    memory dst(conv->to, engine_, conv->scratch.data());
    conv->prim.execute(stream_, src, dst);
    return dst;
  }

  std::optional<Converter> converter(const memory::desc& from, const memory::desc& to) {
    if (from == to) return std::nullopt;
    memory a(from, engine_, DNNL_MEMORY_NONE), b(to, engine_, DNNL_MEMORY_NONE);
    Converter c{from, to, dnnl::reorder(dnnl::reorder::primitive_desc(a, b)),
                allocate_host(std::max(from.get_size(), to.get_size()))};
    return c;
  }

  ConvPlan& conv_plan(const ConvGeometry& g) {
    auto it = conv_plans_.find(g);
    if (it != conv_plans_.end()) return it->second;
    if (g.out_h() <= 0 || g.out_w() <= 0)
      throw InvalidArgument("conv: input " + g.input_shape().str() + " too small for a " + std::to_string(g.kh) + "x" +
                            std::to_string(g.kw) + " kernel");
    const auto [src, dst, src_in, dst_in] = conv_layouts(g);
    memory::desc any_w({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, tag::any);
    memory::dims strides = {g.stride, g.stride}, pad = {g.pad, g.pad};
    ConvPlan p;
    ConvForward chosen =
        choose_conv_forward(conv_algorithm(conv_algorithm_, g), engine_, src_in, any_w, dst_in, strides, pad);
    p.algorithm = chosen.algorithm;
    p.fwd_pd = chosen.pd;
    p.fwd = dnnl::convolution_forward(p.fwd_pd);
    p.x_in = Stage(engine_, src, p.fwd_pd.src_desc(), StageDirection::kIn);
    p.y_out = Stage(engine_, dst, p.fwd_pd.dst_desc(), StageDirection::kOut);
    auto native_it = native_weights_.find(weight_key(g));
    memory::desc native = native_it != native_weights_.end() ? native_it->second : p.fwd_pd.weights_desc();
    p.fwd_w = converter(native, p.fwd_pd.weights_desc());
    TLOG(Debug) << "conv plan " << g.input_shape().str() << " -> " << g.output_shape().str() << ": fwd "
                << p.fwd_pd.impl_info_str() << ", weight conversions " << (p.fwd_w ? 1 : 0);
    return conv_plans_.emplace(g, std::move(p)).first->second;
  }

  ConvBackward& conv_backward_plan(const ConvGeometry& g) {
    ConvPlan& p = conv_plan(g);
    if (p.bwd) return *p.bwd;
    const auto [src, dst, src_in, dst_in] = conv_layouts(g);
    memory::desc any_w({g.c_out, g.c_in, g.kh, g.kw}, dt::f32, tag::any);
    memory::dims strides = {g.stride, g.stride}, pad = {g.pad, g.pad};
    const dnnl::algorithm alg = p.algorithm;
    ConvBackward b;
#if DNNL_VERSION_MAJOR >= 3
    b.bwd_data_pd = safe_backward<dnnl::convolution_backward_data::primitive_desc>(g, engine_, alg, src_in, any_w,
                                                                                   dst_in, strides, pad, pad, p.fwd_pd);
    b.bwd_w_pd = safe_backward<dnnl::convolution_backward_weights::primitive_desc>(g, engine_, alg, src_in, any_w,
                                                                                   dst_in, strides, pad, pad, p.fwd_pd);
#else
    const dnnl::convolution_backward_data::desc data_desc(alg, src_in, any_w, dst_in, strides, pad, pad);
    b.bwd_data_pd = safe_backward<dnnl::convolution_backward_data::primitive_desc>(g, data_desc, engine_, p.fwd_pd);
    const dnnl::convolution_backward_weights::desc weights_desc(alg, src_in, any_w, dst_in, strides, pad, pad);
    b.bwd_w_pd = safe_backward<dnnl::convolution_backward_weights::primitive_desc>(g, weights_desc, engine_, p.fwd_pd);
#endif
    b.bwd_data = dnnl::convolution_backward_data(b.bwd_data_pd);
    b.bwd_w = dnnl::convolution_backward_weights(b.bwd_w_pd);
    const memory::desc native = native_weight(g);
    b.bwd_data_w = converter(native, b.bwd_data_pd.weights_desc());
    b.bwd_w_dw = converter(b.bwd_w_pd.diff_weights_desc(), native);
    b.dy_in = Stage(engine_, dst, b.bwd_data_pd.diff_dst_desc(), StageDirection::kIn);
    b.dx_out = Stage(engine_, src, b.bwd_data_pd.diff_src_desc(), StageDirection::kOut);
    b.w_x_in = Stage(engine_, src, b.bwd_w_pd.src_desc(), StageDirection::kIn);
    b.w_dy_in = Stage(engine_, dst, b.bwd_w_pd.diff_dst_desc(), StageDirection::kIn);
    TLOG(Debug) << "conv backward plan " << g.input_shape().str() << ": bwd_data " << b.bwd_data_pd.impl_info_str()
                << ", bwd_w " << b.bwd_w_pd.impl_info_str() << ", weight conversions "
                << (b.bwd_data_w ? 1 : 0) + (b.bwd_w_dw ? 1 : 0);
    p.bwd = std::move(b);
    return *p.bwd;
  }

  NormTraining& norm_training(const NormGeometry& g) {
    NormPlan& p = norm_plans_[g];
    if (!p.training) p.training = make_norm_training(engine_, g);
    return *p.training;
  }

  dnnl::batch_normalization_forward& norm_inference(const NormGeometry& g) {
    NormPlan& p = norm_plans_[g];
    if (!p.infer) p.infer = make_norm_inference(engine_, g);
    return *p.infer;
  }

  PoolPlan& pool_plan(const PoolGeometry& g) {
    auto it = pool_plans_.find(g);
    if (it != pool_plans_.end()) return it->second;
    return pool_plans_.emplace(g, make_pool_plan(engine_, g)).first->second;
  }

  LinearPlan& linear_plan(const LinearGeometry& g) {
    auto it = linear_plans_.find(g);
    if (it != linear_plans_.end()) return it->second;
    return linear_plans_.emplace(g, make_linear_plan(engine_, g)).first->second;
  }

  EltwisePlan& relu_plan(int64_t n) {
    auto it = relu_plans_.find(n);
    if (it != relu_plans_.end()) return it->second;
    return relu_plans_.emplace(n, make_relu_plan(engine_, n)).first->second;
  }

  dnnl::binary& add_plan(int64_t n, Activation act) {
    auto key = std::make_pair(n, act);
    auto it = add_plans_.find(key);
    if (it != add_plans_.end()) return it->second;
    return add_plans_.emplace(key, make_add_plan(engine_, n, act)).first->second;
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  int threads_;
  ConvAlgorithm conv_algorithm_;
  Buffer stage_a_, stage_b_;  // staging buffers shared by all convolutions (staging.h)
  std::map<ConvGeometry, memory::desc> native_weights_;
  std::map<ConvGeometry, std::optional<Converter>> hwio_to_native_;  // by weight_key: small_backward_weights
  std::map<ConvGeometry, ConvPlan> conv_plans_;
  std::map<NormGeometry, NormPlan> norm_plans_;
  std::map<PoolGeometry, PoolPlan> pool_plans_;
  std::map<LinearGeometry, LinearPlan> linear_plans_;
  std::map<int64_t, EltwisePlan> relu_plans_;
  std::map<std::pair<int64_t, Activation>, dnnl::binary> add_plans_;
};

}  // namespace

int default_threads() {
  return static_cast<int>(tunables::process_snapshot().integer("TORUS_NUM_THREADS").value_or(env::available_cpus()));
}

ConvAlgorithm default_conv_algorithm() {
  const int64_t winograd = tunables::process_snapshot().integer("TORUS_CPU_WINOGRAD").value_or(1);
  if (winograd != 0 && winograd != 1)
    throw InvalidArgument("TORUS_CPU_WINOGRAD: expected 0 or 1, got " + std::to_string(winograd));
  return winograd == 1 ? ConvAlgorithm::kWinogradWhereAvailable : ConvAlgorithm::kDirect;
}

std::unique_ptr<Backend> make_cpu_backend(int threads) { return make_cpu_backend(threads, default_conv_algorithm()); }

std::unique_ptr<Backend> make_cpu_backend(int threads, ConvAlgorithm algorithm) {
  if (threads <= 0) threads = default_threads();
  if (threads <= 0)
    throw InvalidArgument("TORUS_NUM_THREADS: must be a positive integer, got " + std::to_string(threads));
  return std::make_unique<CpuBackend>(threads, algorithm);
}

}  // namespace torus::worker::cpu

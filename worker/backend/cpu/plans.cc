#include "worker/backend/cpu/plans.h"

#include <string>

#include "common/util/error.h"
#include "worker/backend/cpu/impl_choice.h"

namespace torus::worker::cpu {
namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::normalization_flags norm_flags(const NormGeometry& g) {
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (g.activation == Activation::kRelu) flags |= dnnl::normalization_flags::fuse_norm_relu;
  return flags;
}

}  // namespace

NormTraining make_norm_training(const dnnl::engine& engine, const NormGeometry& g) {
  memory::desc md = activation_desc(g.n, g.h, g.w, g.c);
  NormTraining t;
#if DNNL_VERSION_MAJOR >= 3
  t.train_pd = barrier_free<dnnl::batch_normalization_forward::primitive_desc>(
      engine, dnnl::prop_kind::forward_training, md, md, g.eps, norm_flags(g));
  t.bwd_pd = barrier_free<dnnl::batch_normalization_backward::primitive_desc>(engine, dnnl::prop_kind::backward, md, md,
                                                                              md, g.eps, norm_flags(g), t.train_pd);
#else
  t.train_pd = barrier_free<dnnl::batch_normalization_forward::primitive_desc>(
      dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, md, g.eps, norm_flags(g)), engine);
  t.bwd_pd = barrier_free<dnnl::batch_normalization_backward::primitive_desc>(
      dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, md, md, g.eps, norm_flags(g)), engine,
      t.train_pd);
#endif
  t.train = dnnl::batch_normalization_forward(t.train_pd);
  t.bwd = dnnl::batch_normalization_backward(t.bwd_pd);
  return t;
}

dnnl::batch_normalization_forward make_norm_inference(const dnnl::engine& engine, const NormGeometry& g) {
  memory::desc md = activation_desc(g.n, g.h, g.w, g.c);
  const auto flags = norm_flags(g) | dnnl::normalization_flags::use_global_stats;
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::batch_normalization_forward({engine, dnnl::prop_kind::forward_inference, md, md, g.eps, flags});
#else
  return dnnl::batch_normalization_forward({{dnnl::prop_kind::forward_inference, md, g.eps, flags}, engine});
#endif
}

PoolPlan make_pool_plan(const dnnl::engine& engine, const PoolGeometry& g) {
  if (g.out_h() <= 0 || g.out_w() <= 0) throw InvalidArgument("pool: input " + g.input_shape().str() + " too small");
  memory::desc src = nhwc_desc(g.n, g.h, g.w, g.c), dst = nhwc_desc(g.n, g.out_h(), g.out_w(), g.c);
  auto alg = g.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
  memory::dims strides = {g.stride, g.stride}, kernel = {g.kh, g.kw}, pad = {g.pad, g.pad};
  PoolPlan p;
#if DNNL_VERSION_MAJOR >= 3
  const memory::dims dilation = {0, 0};
  p.fwd_pd = {engine, dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, dilation, pad, pad};
  p.bwd_pd = {engine, alg, src, dst, strides, kernel, dilation, pad, pad, p.fwd_pd};
#else
  p.fwd_pd = {{dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, pad, pad}, engine};
  p.bwd_pd = {{alg, src, dst, strides, kernel, pad, pad}, engine, p.fwd_pd};
#endif
  p.fwd = dnnl::pooling_forward(p.fwd_pd);
  p.bwd = dnnl::pooling_backward(p.bwd_pd);
  return p;
}

LinearPlan make_linear_plan(const dnnl::engine& engine, const LinearGeometry& g) {
  memory::desc src({g.n, g.in}, dt::f32, tag::nc), w({g.out, g.in}, dt::f32, tag::oi), b({g.out}, dt::f32, tag::x),
      dst({g.n, g.out}, dt::f32, tag::nc);
  LinearPlan p;
#if DNNL_VERSION_MAJOR >= 3
  p.fwd_pd = {engine, dnnl::prop_kind::forward_training, src, w, b, dst};
  p.bwd_data_pd = {engine, src, w, dst, p.fwd_pd};
  p.bwd_w_pd = {engine, src, w, b, dst, p.fwd_pd};
#else
  p.fwd_pd = {{dnnl::prop_kind::forward_training, src, w, b, dst}, engine};
  p.bwd_data_pd = {{src, w, dst}, engine, p.fwd_pd};
  p.bwd_w_pd = {{src, w, b, dst}, engine, p.fwd_pd};
#endif
  p.fwd = dnnl::inner_product_forward(p.fwd_pd);
  p.bwd_data = dnnl::inner_product_backward_data(p.bwd_data_pd);
  p.bwd_w = dnnl::inner_product_backward_weights(p.bwd_w_pd);
  return p;
}

EltwisePlan make_relu_plan(const dnnl::engine& engine, int64_t n) {
  memory::desc md = flat_desc(n);
  auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  EltwisePlan p;
#if DNNL_VERSION_MAJOR >= 3
  p.fwd_pd = {engine, dnnl::prop_kind::forward_training, alg, md, md, 0.f, 0.f};
  p.bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(engine, alg, md, md, md, 0.f, 0.f, p.fwd_pd));
#else
  p.fwd_pd = {{dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f}, engine};
  p.bwd = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc({alg, md, md, 0.f, 0.f}, engine, p.fwd_pd));
#endif
  p.fwd = dnnl::eltwise_forward(p.fwd_pd);
  return p;
}

dnnl::binary make_add_plan(const dnnl::engine& engine, int64_t n, Activation act) {
  memory::desc md = flat_desc(n);
  dnnl::primitive_attr attr;
  if (act == Activation::kRelu) {
    dnnl::post_ops po;
#if DNNL_VERSION_MAJOR >= 3
    po.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#else
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#endif
    attr.set_post_ops(po);
  }
#if DNNL_VERSION_MAJOR >= 3
  dnnl::binary::primitive_desc pd(engine, dnnl::algorithm::binary_add, md, md, md, attr);
#else
  dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, md, md, md}, attr, engine);
#endif
  return dnnl::binary(pd);
}

}  // namespace torus::worker::cpu

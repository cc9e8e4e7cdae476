#pragma once
// The oneDNN primitives the CPU backend (cpu_backend.cc) builds once per geometry and keeps.
#include <cstdint>
#include <dnnl.hpp>
#include <optional>

#include "worker/backend/backend.h"
#include "worker/backend/cpu/staging.h"

namespace torus::worker::cpu {

// A weight layout conversion, done into a buffer the plan owns (only when two primitives disagree).
struct Converter {
  dnnl::memory::desc from, to;
  dnnl::reorder prim;
  Buffer scratch;  // holds the converted weights
};

struct ConvBackward {
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd;
  dnnl::convolution_backward_weights bwd_w;
  std::optional<Converter> bwd_data_w, bwd_w_dw;  // native <-> what each primitive wants
  Stage dy_in, dx_out, w_x_in, w_dy_in;           // NHWC <-> the layout each primitive wants
};

// Backward parts are built on the first backward call of a geometry: shapes only evaluated (rectangular validation
// batches, one per aspect ratio) never pay for their primitives or their weight-sized conversion buffers.
struct ConvPlan {
  // Every pass's algorithm (choose_conv_forward in impl_choice.h).
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  std::optional<Converter> fwd_w;
  Stage x_in, y_out;
  std::optional<ConvBackward> bwd;
};

struct NormTraining {
  dnnl::batch_normalization_forward::primitive_desc train_pd;
  dnnl::batch_normalization_forward train;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_backward bwd;
};

struct NormPlan {
  std::optional<NormTraining> training;                    // training forward and backward, on first use
  std::optional<dnnl::batch_normalization_forward> infer;  // evaluation, on first use
};

struct PoolPlan {
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward::primitive_desc bwd_pd;
  dnnl::pooling_backward bwd;
};

struct LinearPlan {
  dnnl::inner_product_forward::primitive_desc fwd_pd;
  dnnl::inner_product_forward fwd;
  dnnl::inner_product_backward_data::primitive_desc bwd_data_pd;
  dnnl::inner_product_backward_data bwd_data;
  dnnl::inner_product_backward_weights::primitive_desc bwd_w_pd;
  dnnl::inner_product_backward_weights bwd_w;
};

struct EltwisePlan {
  dnnl::eltwise_forward::primitive_desc fwd_pd;
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
};

// The primitives of one geometry (plans.cc), built on first use and kept by the backend; the convolutions', which
// depend on the weight layouts the backend keeps, are built in cpu_backend.cc.
NormTraining make_norm_training(const dnnl::engine& engine, const NormGeometry& g);
dnnl::batch_normalization_forward make_norm_inference(const dnnl::engine& engine, const NormGeometry& g);
PoolPlan make_pool_plan(const dnnl::engine& engine, const PoolGeometry& g);  // InvalidArgument: input too small
LinearPlan make_linear_plan(const dnnl::engine& engine, const LinearGeometry& g);
EltwisePlan make_relu_plan(const dnnl::engine& engine, int64_t n);
// y = a + b over n floats, with `act` applied after.
dnnl::binary make_add_plan(const dnnl::engine& engine, int64_t n, Activation act);

}  // namespace torus::worker::cpu

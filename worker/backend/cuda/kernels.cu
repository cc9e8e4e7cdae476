// Torus's own CUDA kernels (batch norm's are in norm_kernels.cu). Few translation units on purpose: nvcc is slow,
// CI has two cores. Kernels are templated only over the storage dtype (three instantiations each) and grid-stride
// over elements.
#include <string>

#include "common/util/error.h"
#include "worker/backend/cuda/errors.h"
#include "worker/backend/cuda/kernel_common.cuh"
#include "worker/backend/cuda/kernels.h"

namespace torus::worker::cuda {
namespace {

template <DType S, DType D>
__global__ void convert_kernel(const void* src, void* dst, int64_t n) {
  const auto* in = static_cast<const typename Storage<S>::T*>(src);
  auto* out = static_cast<typename Storage<D>::T*>(dst);
  TORUS_GRID_STRIDE(i, n) Storage<D>::store(out, i, Storage<S>::load(in, i));
}

template <DType D>
__global__ void fill_kernel(void* dst, int64_t n, float value) {
  auto* out = static_cast<typename Storage<D>::T*>(dst);
  TORUS_GRID_STRIDE(i, n) Storage<D>::store(out, i, value);
}

// The memory-bound element-wise kernels take `packed` (every pointer 16-byte aligned: the launcher's packable): the
// packs first, in 16-byte loads and stores, then the elements past the last whole pack one by one, from the same
// thread index on (kernel_math.h: kPackBytes). Unpacked, every element one by one.
template <DType D>
__global__ void relu_forward_kernel(const void* x, void* y, int64_t n, bool packed) {
  using S = Storage<D>;
  using P = Pack<D>;
  const int64_t first = packed ? kmath::packs_of(n, P::kN) * P::kN : 0;
  if (packed) {
    TORUS_GRID_STRIDE(k, kmath::packs_of(n, P::kN)) {
      P p = P::load(x, k);
#pragma unroll
      for (int j = 0; j < P::kN; ++j) p.v[j] = kmath::relu(p.v[j]);
      p.store(y, k);
    }
  }
  const auto* in = static_cast<const typename S::T*>(x);
  auto* out = static_cast<typename S::T*>(y);
  TORUS_GRID_STRIDE_FROM(i, first, n) S::store(out, i, kmath::relu(S::load(in, i)));
}

template <DType D>
__global__ void relu_backward_kernel(const void* y, const void* dy, void* dx, int64_t n, bool packed) {
  using S = Storage<D>;
  using P = Pack<D>;
  const int64_t first = packed ? kmath::packs_of(n, P::kN) * P::kN : 0;
  if (packed) {
    TORUS_GRID_STRIDE(k, kmath::packs_of(n, P::kN)) {
      const P py = P::load(y, k);
      P p = P::load(dy, k);
#pragma unroll
      for (int j = 0; j < P::kN; ++j) p.v[j] = kmath::relu_grad(py.v[j], p.v[j]);
      p.store(dx, k);
    }
  }
  const auto* yp = static_cast<const typename S::T*>(y);
  const auto* dyp = static_cast<const typename S::T*>(dy);
  auto* dxp = static_cast<typename S::T*>(dx);
  TORUS_GRID_STRIDE_FROM(i, first, n) S::store(dxp, i, kmath::relu_grad(S::load(yp, i), S::load(dyp, i)));
}

template <DType D>
__global__ void add_kernel(const void* a, const void* b, void* y, int64_t n, bool relu, bool packed) {
  using S = Storage<D>;
  using P = Pack<D>;
  const int64_t first = packed ? kmath::packs_of(n, P::kN) * P::kN : 0;
  if (packed) {
    TORUS_GRID_STRIDE(k, kmath::packs_of(n, P::kN)) {
      const P pb = P::load(b, k);
      P p = P::load(a, k);
#pragma unroll
      for (int j = 0; j < P::kN; ++j) p.v[j] = kmath::add_act(p.v[j], pb.v[j], relu);
      p.store(y, k);
    }
  }
  const auto* ap = static_cast<const typename S::T*>(a);
  const auto* bp = static_cast<const typename S::T*>(b);
  auto* yp = static_cast<typename S::T*>(y);
  TORUS_GRID_STRIDE_FROM(i, first, n) S::store(yp, i, kmath::add_act(S::load(ap, i), S::load(bp, i), relu));
}

// One warp covers 32 consecutive elements, so __ballot_sync yields exactly mask word i / 32. The loop bound is
// rounded up to whole warps so every lane takes part in the ballot.
template <DType D>
__global__ void relu_with_mask_kernel(void* y, uint32_t* mask, int64_t n) {
  using S = Storage<D>;
  auto* yp = static_cast<typename S::T*>(y);
  const int64_t padded = (n + 31) / 32 * 32;
  TORUS_GRID_STRIDE(i, padded) {
    const bool inside = i < n;
    const float v = inside ? S::load(yp, i) : 0.0f;
    const uint32_t bits = __ballot_sync(0xffffffffu, v > 0.0f);
    if (inside) S::store(yp, i, kmath::relu(v));
    if ((threadIdx.x & 31) == 0) mask[i / 32] = bits;
  }
}

__global__ void var_from_invstd_kernel(float* v, int64_t c, float eps) {
  TORUS_GRID_STRIDE(i, c) v[i] = kmath::var_from_invstd(v[i], eps);
}

__global__ void invstd_from_var_kernel(const float* var, float* invstd, int64_t c, float eps) {
  TORUS_GRID_STRIDE(i, c) invstd[i] = kmath::invstd_from_var(var[i], eps);
}

__global__ void bias_add_kernel(float* y, const float* b, int64_t n, int64_t out) {
  TORUS_GRID_STRIDE(i, n * out) y[i] += b[i % out];
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per row: max, log-sum-exp, then each class's loss term and gradient (kernel_math.h formulas).
__global__ void xent_rows_kernel(const float* logits, const int32_t* labels, int64_t n, int64_t k, float smoothing,
                                 const float* grad_scale, float* dlogits, float* row_loss, LossScalars* out) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= n) return;  // whole warps leave together (rows are warp-uniform)
  const float* z = logits + row * k;
  const int label = labels[row];
  const int classes = static_cast<int>(k);
  if (label < 0 || label >= classes) {  // reported by the host; the row contributes nothing
    if (dlogits != nullptr)
      for (int64_t j = lane; j < k; j += 32) dlogits[row * k + j] = 0.0f;
    if (lane == 0) {
      atomicCAS(&out->bad_label, 0, static_cast<int32_t>(row) + 1);
      row_loss[row] = 0.0f;
    }
    return;
  }
  float zmax = -INFINITY;
  for (int64_t j = lane; j < k; j += 32) zmax = fmaxf(zmax, z[j]);
  zmax = warp_max(zmax);
  float sum = 0.0f;
  for (int64_t j = lane; j < k; j += 32) sum += kmath::shifted_exp(z[j], zmax);
  const float log_sum = logf(warp_sum(sum));
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  const float inv_n = 1.0f / static_cast<float>(n);
  float loss = 0.0f;
  for (int64_t j = lane; j < k; j += 32) {
    const float lp = kmath::log_prob(z[j], zmax, log_sum);
    const int cls = static_cast<int>(j);
    loss += kmath::xent_term(lp, cls, label, smoothing, classes);
    if (dlogits != nullptr) dlogits[row * k + j] = kmath::xent_grad(lp, cls, label, smoothing, classes, inv_n, scale);
  }
  loss = warp_sum(loss);
  if (lane == 0) row_loss[row] = loss;
}

// One block sums the rows in a fixed order (same result every run), then divides.
__global__ void mean_kernel(const float* row_loss, int64_t n, LossScalars* out) {
  __shared__ float partial[kThreads];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += row_loss[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out->loss = kmath::mean_of(partial[0], n);
}

__global__ void top_k_kernel(const float* logits, const int32_t* labels, int64_t n, int64_t k, int top,
                             LossScalars* out) {
  TORUS_GRID_STRIDE(row, n) {
    const int label = labels[row];
    if (label < 0 || label >= k) {
      atomicCAS(&out->bad_label, 0, static_cast<int32_t>(row) + 1);
      continue;
    }
    if (kmath::classes_above(logits + row * k, k, label) < top) atomicAdd(&out->correct, 1);
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* v, int64_t n, float lr, const float* lr_value,
                           float momentum, float weight_decay, math::Nesterov nesterov, const int32_t* skip) {
  if (skip != nullptr && *skip != 0) return;
  if (lr_value != nullptr) lr = *lr_value;
  TORUS_GRID_STRIDE(i, n) {
    float wi = w[i], vi = v[i];
    math::sgd_element(wi, g[i], vi, lr, momentum, weight_decay, nesterov);
    w[i] = wi;
    v[i] = vi;
  }
}

__global__ void sgd_chunks_kernel(const kmath::SgdChunk* chunks, float* w, const float* g, float* v, float lr,
                                  const float* lr_value, float momentum, math::Nesterov nesterov, const int32_t* skip) {
  if (skip != nullptr && *skip != 0) return;
  if (lr_value != nullptr) lr = *lr_value;
  const kmath::SgdChunk c = chunks[blockIdx.x];
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < c.elements; i += static_cast<int32_t>(blockDim.x))
    kmath::sgd_chunk_element(c, i, w, g, v, lr, momentum, nesterov);
}

__global__ void unscale_kernel(float* g, int64_t n, kmath::LossScaleState* state) {
  const float inv_scale = 1.0f / state->scale;
  int32_t found = 0;
  TORUS_GRID_STRIDE(i, n) g[i] = kmath::unscale(g[i], inv_scale, found);
  if (found != 0) state->found_inf = 1;  // every writer writes the same value
}

__global__ void loss_scale_update_kernel(kmath::LossScaleState* state, kmath::LossScaleConfig config) {
  kmath::loss_scale_update(*state, config);
}

template <DType D>
__global__ void augment_kernel(const uint8_t* images, void* out, int64_t n, int32_t h, int32_t w, int32_t c,
                               AugmentSpec spec, uint64_t first_sample) {
  using S = Storage<D>;
  auto* o = static_cast<typename S::T*>(out);
  const int64_t per_image = static_cast<int64_t>(h) * w * c;
  TORUS_GRID_STRIDE(i, n * per_image) {
    const kmath::NhwcIndex at = kmath::nhwc_index(i, h, w, c);
    const kmath::SampleAugment a =
        kmath::sample_augment(spec.seed, first_sample + static_cast<uint64_t>(at.n), spec.max_shift, spec.flip);
    S::store(o, i, kmath::augmented_value(images + at.n * per_image, at.y, at.x, at.c, h, w, c, a, spec));
  }
}

}  // namespace

void launch_convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (src_type == dst_type) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(src_type), cudaMemcpyDeviceToDevice, s));
    return;
  }
  dispatch(src_type, [&]<DType S>() {
    dispatch(dst_type, [&]<DType D>() { convert_kernel<S, D><<<blocks_for(n), kThreads, 0, s>>>(src, dst, n); });
  });
  check_launch();
}

void launch_fill(void* dst, DType type, int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(type, [&]<DType D>() { fill_kernel<D><<<blocks_for(n), kThreads, 0, s>>>(dst, n, value); });
  check_launch();
}

void launch_relu_forward(const void* x, void* y, DType type, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const bool packed = packable(x, y);
  dispatch(type, [&]<DType D>() {
    relu_forward_kernel<D><<<blocks_for(kmath::work_items(n, Pack<D>::kN, packed)), kThreads, 0, s>>>(x, y, n, packed);
  });
  check_launch();
}

void launch_relu_backward(const void* y, const void* dy, void* dx, DType type, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const bool packed = packable(y, dy, dx);
  dispatch(type, [&]<DType D>() {
    relu_backward_kernel<D>
        <<<blocks_for(kmath::work_items(n, Pack<D>::kN, packed)), kThreads, 0, s>>>(y, dy, dx, n, packed);
  });
  check_launch();
}

void launch_add(const void* a, const void* b, void* y, DType type, int64_t n, bool relu, cudaStream_t s) {
  if (n <= 0) return;
  const bool packed = packable(a, b, y);
  dispatch(type, [&]<DType D>() {
    add_kernel<D><<<blocks_for(kmath::work_items(n, Pack<D>::kN, packed)), kThreads, 0, s>>>(a, b, y, n, relu, packed);
  });
  check_launch();
}

void launch_relu_with_mask(void* y, uint32_t* mask, DType type, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  dispatch(type, [&]<DType D>() { relu_with_mask_kernel<D><<<blocks_for(n), kThreads, 0, s>>>(y, mask, n); });
  check_launch();
}

void launch_var_from_invstd(float* inout, int64_t c, float eps, cudaStream_t s) {
  if (c <= 0) return;
  var_from_invstd_kernel<<<blocks_for(c), kThreads, 0, s>>>(inout, c, eps);
  check_launch();
}

void launch_invstd_from_var(const float* var, float* invstd, int64_t c, float eps, cudaStream_t s) {
  if (c <= 0) return;
  invstd_from_var_kernel<<<blocks_for(c), kThreads, 0, s>>>(var, invstd, c, eps);
  check_launch();
}

void launch_bias_add(float* y, const float* b, int64_t n, int64_t out, cudaStream_t s) {
  if (n * out <= 0) return;
  bias_add_kernel<<<blocks_for(n * out), kThreads, 0, s>>>(y, b, n, out);
  check_launch();
}

void launch_softmax_xent(const float* logits, const int32_t* labels, int64_t n, int64_t k, float smoothing,
                         const float* grad_scale, float* dlogits, float* row_loss, LossScalars* out, cudaStream_t s) {
  if (n <= 0) return;
  xent_rows_kernel<<<kmath::warp_per_row_blocks(n, kThreads), kThreads, 0, s>>>(logits, labels, n, k, smoothing,
                                                                                grad_scale, dlogits, row_loss, out);
  check_launch();
  mean_kernel<<<1, kThreads, 0, s>>>(row_loss, n, out);
  check_launch();
}

void launch_count_top_k(const float* logits, const int32_t* labels, int64_t n, int64_t k, int top, LossScalars* out,
                        cudaStream_t s) {
  if (n <= 0) return;
  top_k_kernel<<<blocks_for(n), kThreads, 0, s>>>(logits, labels, n, k, top, out);
  check_launch();
}

void launch_sgd(float* w, const float* g, float* v, int64_t n, float lr, const float* lr_value, float momentum,
                float weight_decay, math::Nesterov nesterov, const int32_t* skip, cudaStream_t s) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, g, v, n, lr, lr_value, momentum, weight_decay, nesterov, skip);
  check_launch();
}

void launch_sgd_chunks(const kmath::SgdChunk* chunks, int64_t n_chunks, float* w, const float* g, float* v, float lr,
                       const float* lr_value, float momentum, math::Nesterov nesterov, const int32_t* skip,
                       cudaStream_t s) {
  if (n_chunks <= 0) return;
  if (n_chunks > INT32_MAX) throw InvalidArgument("sgd: " + std::to_string(n_chunks) + " chunks exceed one grid");
  sgd_chunks_kernel<<<static_cast<unsigned>(n_chunks), kThreads, 0, s>>>(chunks, w, g, v, lr, lr_value, momentum,
                                                                         nesterov, skip);
  check_launch();
}

void launch_unscale(float* g, int64_t n, kmath::LossScaleState* state, cudaStream_t s) {
  if (n <= 0) return;
  unscale_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, n, state);
  check_launch();
}

void launch_loss_scale_update(kmath::LossScaleState* state, const kmath::LossScaleConfig& config, cudaStream_t s) {
  loss_scale_update_kernel<<<1, 1, 0, s>>>(state, config);
  check_launch();
}

void launch_augment(const uint8_t* images, void* out, DType out_type, int64_t n, int64_t h, int64_t w, int64_t c,
                    const AugmentSpec& spec, uint64_t first_sample, cudaStream_t s) {
  const int64_t total = n * h * w * c;
  if (total <= 0) return;
  dispatch(out_type, [&]<DType D>() {
    augment_kernel<D><<<blocks_for(total), kThreads, 0, s>>>(
        images, out, n, static_cast<int32_t>(h), static_cast<int32_t>(w), static_cast<int32_t>(c), spec, first_sample);
  });
  check_launch();
}

}  // namespace torus::worker::cuda

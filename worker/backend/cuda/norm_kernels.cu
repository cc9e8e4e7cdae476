// Batch norm over NHWC tensors: an (N, H, W, C) tensor is m = N * H * W rows of C channels. cuDNN's own NHWC
// batch norm outside its fp16 persistent kernels runs NCHW kernels over the NHWC data: on an H200 those took 95%
// of a ResNet-50 step (420 of 445 ms per step at batch 128, fp32 and bf16 alike). These kernels read rows
// coalesced: blocks of 32 channels x 8 rows, one row slice per gridDim.y, each thread loading several rows ahead; the
// per-slice partials of each channel are merged by 16 lanes, then the lanes, each in a fixed order (deterministic; the
// formulas and the merge order are norm_math.h's).
#include <algorithm>
#include <string>
#include <utility>

#include "worker/backend/cuda/kernel_common.cuh"
#include "worker/backend/cuda/kernels.h"
#include "worker/backend/cuda/norm_math.h"

namespace torus::worker::cuda {
namespace {

using kmath::kBnLanes;
using kmath::kBnRowsPerBlock;

struct Grid {
  dim3 blocks, threads;
  int64_t slices;
};
Grid bn_grid(int64_t m, int64_t c) {
  const int64_t slices = kmath::bn_row_slices(m, c);
  return {dim3(static_cast<unsigned>(kmath::bn_channel_tiles(c)), static_cast<unsigned>(slices)),
          dim3(kBnLanes, kBnRowsPerBlock), slices};
}

// The row loop of the (channel, row-slice) grid: thread (x, y) of block (bx, by) visits rows by * 8 + y, stepping
// over every slice's rows, of channel bx * 32 + x, in that order (the order norm_math.h's merges and the CPU tests
// assume). `load(r)` reads a row's values and `use(r, values)` folds or writes them; kBnRowsUnrolled rows are loaded
// before any is used, so each thread keeps that many loads in flight: one 2-byte load per thread keeps only a few
// KiB in flight per SM, far below what HBM needs (bandwidth x latency) to stream. Rows are uniform across a warp
// (one threadIdx.y), so `use` may hold a warp-wide ballot.
constexpr int kBnRowsUnrolled = 4;
template <typename Load, typename Use>
__device__ void bn_rows(int64_t m, Load load, Use use) {
  const int64_t stride = gridDim.y * int64_t{kBnRowsPerBlock};
  for (int64_t first = blockIdx.y * int64_t{kBnRowsPerBlock} + threadIdx.y; first < m;
       first += kBnRowsUnrolled * stride) {
    decltype(load(first)) values[kBnRowsUnrolled]{};
#pragma unroll
    for (int u = 0; u < kBnRowsUnrolled; ++u)
      if (first + u * stride < m) values[u] = load(first + u * stride);
#pragma unroll
    for (int u = 0; u < kBnRowsUnrolled; ++u)
      if (first + u * stride < m) use(first + u * stride, values[u]);
  }
}

// One element's operands: (x, residual) forward, (x, dy through the ReLU's mask) backward.
struct Pair {
  float a = 0.0f, b = 0.0f;
};

__device__ int64_t bn_channel() { return blockIdx.x * int64_t{kBnLanes} + threadIdx.x; }

// Per slice and channel: the moments of the slice's rows (8 row lanes merged in order).
template <DType D>
__global__ void bn_moments_kernel(const void* x, int64_t m, int64_t c, kmath::Moments* partial) {
  using S = Storage<D>;
  const auto* in = static_cast<const typename S::T*>(x);
  const int64_t ch = bn_channel();
  kmath::Moments acc;
  if (ch < c) {
    bn_rows(
        m, [&](int64_t r) { return S::load(in, r * c + ch); }, [&](int64_t, float v) { kmath::moments_push(acc, v); });
  }
  __shared__ int64_t n[kBnRowsPerBlock][kBnLanes];
  __shared__ float mean[kBnRowsPerBlock][kBnLanes], m2[kBnRowsPerBlock][kBnLanes];
  n[threadIdx.y][threadIdx.x] = acc.n;
  mean[threadIdx.y][threadIdx.x] = acc.mean;
  m2[threadIdx.y][threadIdx.x] = acc.m2;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= c) return;
  for (int k = 1; k < kBnRowsPerBlock; ++k)
    acc = kmath::moments_merge(acc, {n[k][threadIdx.x], mean[k][threadIdx.x], m2[k][threadIdx.x]});
  partial[blockIdx.y * c + ch] = acc;
}

// The finalize kernels' grid: one block per 32 channels, kBnFinalizeLanes lanes of slices per channel.
dim3 finalize_blocks(int64_t c) { return dim3(static_cast<unsigned>(kmath::bn_channel_tiles(c))); }
dim3 finalize_threads() { return dim3(kBnLanes, kmath::kBnFinalizeLanes); }

// Per channel: its slices merged by the block's lanes (kmath::lane_moments), the lanes by lane 0, which finishes it.
__global__ void bn_finalize_kernel(const kmath::Moments* partial, int64_t slices, int64_t c, float eps, float momentum,
                                   const float* gamma, const float* beta, float* save_mean, float* save_var,
                                   float* running_mean, float* running_var, kmath::Affine* affine) {
  const int64_t ch = bn_channel();
  kmath::Moments acc;
  if (ch < c) acc = kmath::lane_moments(partial, slices, c, ch, static_cast<int>(threadIdx.y));
  __shared__ int64_t n[kmath::kBnFinalizeLanes][kBnLanes];
  __shared__ float mean[kmath::kBnFinalizeLanes][kBnLanes], m2[kmath::kBnFinalizeLanes][kBnLanes];
  n[threadIdx.y][threadIdx.x] = acc.n;
  mean[threadIdx.y][threadIdx.x] = acc.mean;
  m2[threadIdx.y][threadIdx.x] = acc.m2;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= c) return;
  for (int k = 1; k < kmath::kBnFinalizeLanes; ++k)
    acc = kmath::moments_merge(acc, {n[k][threadIdx.x], mean[k][threadIdx.x], m2[k][threadIdx.x]});
  const float var = kmath::biased_var(acc);
  save_mean[ch] = acc.mean;
  save_var[ch] = var;
  running_mean[ch] = math::running_update(running_mean[ch], acc.mean, momentum);
  running_var[ch] = math::running_update(running_var[ch], kmath::unbiased_var(acc), momentum);
  affine[ch] = kmath::bn_affine_of(acc.mean, var, eps, gamma[ch], beta[ch]);
}

__global__ void bn_inference_affine_kernel(const float* gamma, const float* beta, const float* mean, const float* var,
                                           int64_t c, float eps, kmath::Affine* affine) {
  TORUS_GRID_STRIDE(ch, c) affine[ch] = kmath::bn_affine_of(mean[ch], var[ch], eps, gamma[ch], beta[ch]);
}

// y = bn(x), plus the residual when there is one (a block's join), then the ReLU when `relu`.
template <DType D>
__global__ void bn_apply_kernel(const void* x, const void* residual, void* y, int64_t m, int64_t c,
                                const kmath::Affine* affine, bool relu) {
  using S = Storage<D>;
  const auto* in = static_cast<const typename S::T*>(x);
  const auto* res = static_cast<const typename S::T*>(residual);
  auto* out = static_cast<typename S::T*>(y);
  const int64_t ch = bn_channel();
  if (ch >= c) return;
  const kmath::Affine f = affine[ch];
  bn_rows(
      m,
      [&](int64_t r) {
        return Pair{S::load(in, r * c + ch), res != nullptr ? S::load(res, r * c + ch) : 0.0f};
      },
      [&](int64_t r, Pair p) {
        const float v = kmath::bn_apply(f, p.a) + p.b;
        S::store(out, r * c + ch, relu ? kmath::relu(v) : v);
      });
}

// The training forward of a BN + ReLU layer, or a block's BN + add + ReLU join, whose channels are whole warps
// (kmath::bn_apply_writes_mask): the ReLU and its mask in the normalize pass, one ballot word per warp and row, where
// separate kernels read and wrote the output again (the residual add 6.0 ms, the ReLU and its mask 7.3 ms of a
// 50.6 ms bf16 ResNet-50 step on the H200). The bit is taken from the stored value, as the separate kernel takes it
// from y.
template <DType D>
__global__ void bn_apply_relu_mask_kernel(const void* x, const void* residual, void* y, uint32_t* mask, int64_t m,
                                          int64_t c, const kmath::Affine* affine) {
  using S = Storage<D>;
  const auto* in = static_cast<const typename S::T*>(x);
  const auto* res = static_cast<const typename S::T*>(residual);
  auto* out = static_cast<typename S::T*>(y);
  const int64_t ch = bn_channel();
  const kmath::Affine f = affine[ch];
  bn_rows(
      m,
      [&](int64_t r) {
        return Pair{S::load(in, r * c + ch), res != nullptr ? S::load(res, r * c + ch) : 0.0f};
      },
      [&](int64_t r, Pair p) {
        const int64_t i = r * c + ch;
        S::store(out, i, kmath::relu(kmath::bn_apply(f, p.a) + p.b));
        const uint32_t bits = __ballot_sync(0xffffffffu, S::load(out, i) > 0.0f);
        if (threadIdx.x == 0) mask[kmath::bn_mask_word(r, c, blockIdx.x)] = bits;
      });
}

// Per slice and channel: sum dy and sum dy * (x - mean).
template <DType D>
__global__ void bn_backward_sums_kernel(const void* x, const void* dy, const uint32_t* mask, int64_t m, int64_t c,
                                        const float* mean, kmath::Sums* partial) {
  using S = Storage<D>;
  const auto* in = static_cast<const typename S::T*>(x);
  const auto* grad = static_cast<const typename S::T*>(dy);
  const int64_t ch = bn_channel();
  float sum_dy = 0.0f, sum_dy_xmu = 0.0f;
  if (ch < c) {
    const float mu = mean[ch];
    bn_rows(
        m,
        [&](int64_t r) {
          const int64_t i = r * c + ch;
          return Pair{S::load(in, i), kmath::through_relu_mask(mask, i, S::load(grad, i))};
        },
        [&](int64_t, Pair p) {
          sum_dy += p.b;
          sum_dy_xmu += p.b * (p.a - mu);
        });
  }
  __shared__ float a[kBnRowsPerBlock][kBnLanes], b[kBnRowsPerBlock][kBnLanes];
  a[threadIdx.y][threadIdx.x] = sum_dy;
  b[threadIdx.y][threadIdx.x] = sum_dy_xmu;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= c) return;
  for (int k = 1; k < kBnRowsPerBlock; ++k) {
    sum_dy += a[k][threadIdx.x];
    sum_dy_xmu += b[k][threadIdx.x];
  }
  partial[blockIdx.y * c + ch] = kmath::Sums{sum_dy, sum_dy_xmu};
}

// As bn_finalize_kernel, with the sums (kmath::lane_sums).
__global__ void bn_backward_finalize_kernel(const kmath::Sums* partial, int64_t slices, int64_t c, float m,
                                            const float* mean, const float* invstd, const float* gamma, float* dgamma,
                                            float* dbeta, kmath::NormBackwardCoefficients* coefficients) {
  const int64_t ch = bn_channel();
  kmath::Sums acc;
  if (ch < c) acc = kmath::lane_sums(partial, slices, c, ch, static_cast<int>(threadIdx.y));
  __shared__ float a[kmath::kBnFinalizeLanes][kBnLanes], b[kmath::kBnFinalizeLanes][kBnLanes];
  a[threadIdx.y][threadIdx.x] = acc.dy;
  b[threadIdx.y][threadIdx.x] = acc.dy_xmu;
  __syncthreads();
  if (threadIdx.y != 0 || ch >= c) return;
  for (int k = 1; k < kmath::kBnFinalizeLanes; ++k) acc = kmath::sums_add(acc, {a[k][threadIdx.x], b[k][threadIdx.x]});
  const auto k = kmath::bn_backward_coefficients(acc.dy, acc.dy_xmu, mean[ch], invstd[ch], gamma[ch], m);
  dgamma[ch] = k.dgamma;
  dbeta[ch] = k.dbeta;
  coefficients[ch] = k;
}

// dx; for a block's join also the residual's gradient (dy through the mask), in the same pass.
template <DType D>
__global__ void bn_backward_dx_kernel(const void* x, const void* dy, const uint32_t* mask, void* dx, void* dresidual,
                                      int64_t m, int64_t c, const kmath::NormBackwardCoefficients* coefficients) {
  using S = Storage<D>;
  const auto* in = static_cast<const typename S::T*>(x);
  const auto* grad = static_cast<const typename S::T*>(dy);
  auto* out = static_cast<typename S::T*>(dx);
  auto* dres = static_cast<typename S::T*>(dresidual);
  const int64_t ch = bn_channel();
  if (ch >= c) return;
  const kmath::NormBackwardCoefficients k = coefficients[ch];
  bn_rows(
      m,
      [&](int64_t r) {
        const int64_t i = r * c + ch;
        return Pair{S::load(in, i), kmath::through_relu_mask(mask, i, S::load(grad, i))};
      },
      [&](int64_t r, Pair p) {
        S::store(out, r * c + ch, kmath::bn_backward_dx(k, p.a, p.b));
        if (dres != nullptr) S::store(dres, r * c + ch, p.b);
      });
}

void expect_rows(int64_t m, int64_t c) {
  if (!kmath::bn_rows_supported(m) || c <= 0)
    throw InvalidArgument("batch norm: " + std::to_string(m) + " rows (N * H * W) of " + std::to_string(c) +
                          " channels; expected at least one row and one channel");
}

// The scratch's two parts: per-slice partials, then per-channel values, each 256-byte aligned.
template <typename Partial, typename PerChannel>
std::pair<Partial*, PerChannel*> split(void* scratch, int64_t slices, int64_t c) {
  auto* base = static_cast<char*>(scratch);
  const size_t partials = kmath::align_up(static_cast<size_t>(slices * c) * sizeof(Partial), 256);
  return {reinterpret_cast<Partial*>(base), reinterpret_cast<PerChannel*>(base + partials)};
}

}  // namespace

size_t bn_scratch_bytes(int64_t m, int64_t c) {
  const auto slices = static_cast<size_t>(kmath::bn_row_slices(m, c)), channels = static_cast<size_t>(c);
  const size_t forward =
      kmath::align_up(slices * channels * sizeof(kmath::Moments), 256) + channels * sizeof(kmath::Affine);
  const size_t backward = kmath::align_up(slices * channels * sizeof(kmath::Sums), 256) +
                          channels * sizeof(kmath::NormBackwardCoefficients);
  return std::max(forward, backward);
}

void launch_bn_forward_training(const void* x, void* y, DType type, int64_t m, int64_t c, float eps, float momentum,
                                const float* gamma, const float* beta, float* save_mean, float* save_var,
                                float* running_mean, float* running_var, BnJoin join, void* scratch, cudaStream_t s) {
  expect_rows(m, c);
  if (join.relu_mask != nullptr && !kmath::bn_apply_writes_mask(c))
    throw InvalidArgument("batch norm + ReLU: " + std::to_string(c) +
                          " channels; the fused mask needs a multiple of 32 (run the ReLU-with-mask kernel)");
  const Grid g = bn_grid(m, c);
  auto [partial, affine] = split<kmath::Moments, kmath::Affine>(scratch, g.slices, c);
  dispatch(type, [&]<DType D>() { bn_moments_kernel<D><<<g.blocks, g.threads, 0, s>>>(x, m, c, partial); });
  check_launch();
  bn_finalize_kernel<<<finalize_blocks(c), finalize_threads(), 0, s>>>(
      partial, g.slices, c, eps, momentum, gamma, beta, save_mean, save_var, running_mean, running_var, affine);
  check_launch();
  dispatch(type, [&]<DType D>() {
    if (join.relu_mask != nullptr) {
      bn_apply_relu_mask_kernel<D><<<g.blocks, g.threads, 0, s>>>(x, join.residual, y, join.relu_mask, m, c, affine);
    } else {
      bn_apply_kernel<D><<<g.blocks, g.threads, 0, s>>>(x, join.residual, y, m, c, affine, false);
    }
  });
  check_launch();
}

void launch_bn_forward_inference(const void* x, void* y, DType type, int64_t m, int64_t c, float eps,
                                 const float* gamma, const float* beta, const float* mean, const float* var, bool relu,
                                 void* scratch, cudaStream_t s) {
  expect_rows(m, c);
  const Grid g = bn_grid(m, c);
  auto* affine = static_cast<kmath::Affine*>(scratch);
  bn_inference_affine_kernel<<<blocks_for(c), kThreads, 0, s>>>(gamma, beta, mean, var, c, eps, affine);
  check_launch();
  dispatch(type,
           [&]<DType D>() { bn_apply_kernel<D><<<g.blocks, g.threads, 0, s>>>(x, nullptr, y, m, c, affine, relu); });
  check_launch();
}

void launch_bn_backward(const void* x, const void* dy, BnJoinGrad join, void* dx, DType type, int64_t m, int64_t c,
                        const float* save_mean, const float* invstd, const float* gamma, float* dgamma, float* dbeta,
                        void* scratch, cudaStream_t s) {
  expect_rows(m, c);
  const Grid g = bn_grid(m, c);
  auto [partial, coefficients] = split<kmath::Sums, kmath::NormBackwardCoefficients>(scratch, g.slices, c);
  dispatch(type, [&]<DType D>() {
    bn_backward_sums_kernel<D><<<g.blocks, g.threads, 0, s>>>(x, dy, join.relu_mask, m, c, save_mean, partial);
  });
  check_launch();
  bn_backward_finalize_kernel<<<finalize_blocks(c), finalize_threads(), 0, s>>>(
      partial, g.slices, c, static_cast<float>(m), save_mean, invstd, gamma, dgamma, dbeta, coefficients);
  check_launch();
  dispatch(type, [&]<DType D>() {
    bn_backward_dx_kernel<D>
        <<<g.blocks, g.threads, 0, s>>>(x, dy, join.relu_mask, dx, join.dresidual, m, c, coefficients);
  });
  check_launch();
}

}  // namespace torus::worker::cuda

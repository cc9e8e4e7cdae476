// The CPU backend's hand-written max pooling (worker/backend/cpu/max_pool.cc) against a naive reference: values on
// a coarse grid so windows hold ties (the first maximum in (kh, kw) order wins and alone gets the gradient, as in
// oneDNN and PyTorch), channel counts off the vector width, padding, overlapping windows, uncovered edges, and
// activations of 64 channels and more, which the backend keeps blocked (pooled as images of eight channels).
#include "worker/backend/cpu/max_pool.h"

#include <gtest/gtest.h>

#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "worker/backend/cpu/cpu_backend.h"

namespace torus::worker {
void PrintTo(const PoolGeometry& g, std::ostream* os) {
  *os << g.input_shape().str() << " k" << g.kh << "x" << g.kw << " s" << g.stride << " p" << g.pad;
}
}  // namespace torus::worker

namespace torus::worker::cpu {
namespace {

struct Reference {
  std::vector<float> y, dx;
};

Reference reference(const PoolGeometry& g, const std::vector<float>& x, const std::vector<float>& dy) {
  Reference r{std::vector<float>(g.output_shape().numel()), std::vector<float>(g.input_shape().numel(), 0.0f)};
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.out_h(); ++oh)
      for (int64_t ow = 0; ow < g.out_w(); ++ow)
        for (int64_t c = 0; c < g.c; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.stride - g.pad + i, iw = ow * g.stride - g.pad + j;
              if (ih < 0 || iw < 0 || ih >= g.h || iw >= g.w) continue;
              const int64_t xi = ((n * g.h + ih) * g.w + iw) * g.c + c;
              if (x[xi] > best) {
                best = x[xi];
                at = xi;
              }
            }
          const int64_t yi = ((n * g.out_h() + oh) * g.out_w() + ow) * g.c + c;
          r.y[yi] = best;
          r.dx[at] += dy[yi];
        }
  return r;
}

class MaxPoolByHand : public ::testing::TestWithParam<PoolGeometry> {};

TEST_P(MaxPoolByHand, MatchesTheReferenceWithTies) {
  const PoolGeometry g = GetParam();
  ASSERT_TRUE(max_pool_by_hand(g));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-3, 3);  // 7 levels: most windows hold ties
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(g.input_shape().numel()), dy(g.output_shape().numel());
  for (float& v : x) v = 0.5f * static_cast<float>(level(rng));
  for (float& v : dy) v = u(rng);
  auto backend = make_cpu_backend(1);
  const size_t ws_bytes = backend->pool_workspace_bytes(g);
  EXPECT_EQ(ws_bytes, static_cast<size_t>(g.output_shape().numel()));
  Buffer ws = backend->allocate(ws_bytes);
  // The activations in the backend's own layout (64 channels and more: blocked, staging.h), NHWC here.
  std::vector<float> xb(x.size()), dyb(dy.size()), yb(dy.size(), -7.0f), dxb(x.size(), -7.0f);  // stale values
  const Tensor tx(xb.data(), g.input_shape()), ty(yb.data(), g.output_shape()), tdy(dyb.data(), g.output_shape()),
      tdx(dxb.data(), g.input_shape());  // must not survive
  backend->activation_import(x.data(), tx);
  backend->activation_import(dy.data(), tdy);
  backend->pool_forward(g, tx, ty, Tensor(ws.data(), {static_cast<int64_t>(ws_bytes + 3) / 4}));
  backend->pool_backward(g, tdy, Tensor(ws.data(), {static_cast<int64_t>(ws_bytes + 3) / 4}), tdx);
  std::vector<float> y(dy.size()), dx(x.size());
  backend->activation_export(ty, y.data());
  backend->activation_export(tdx, dx.data());
  const Reference r = reference(g, x, dy);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], r.y[i]) << "y[" << i << "]";
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_FLOAT_EQ(dx[i], r.dx[i]) << "dx[" << i << "]";
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, MaxPoolByHand,
    ::testing::Values(PoolGeometry{2, 8, 8, 16, PoolKind::kMax, 2, 2, 2, 0},   // tiles the image
                      PoolGeometry{3, 7, 7, 13, PoolKind::kMax, 2, 2, 2, 0},   // last row and column uncovered
                      PoolGeometry{2, 9, 6, 3, PoolKind::kMax, 3, 3, 2, 1},    // ImageNet stem: overlap, padding
                      PoolGeometry{2, 5, 5, 8, PoolKind::kMax, 3, 3, 1, 1},    // stride 1
                      PoolGeometry::global(4, 3, 3, 64, PoolKind::kMax),       // ResNet-9 head (blocked)
                      PoolGeometry{2, 7, 6, 128, PoolKind::kMax, 2, 2, 2, 0},  // blocked, 16 blocks of 8
                      PoolGeometry{1, 28, 28, 16, PoolKind::kMax, 2, 2, 2, 0}  // the narrow ResNet-9's first pool
                      ),
    [](const auto& param_info) {
      const PoolGeometry& g = param_info.param;
      return std::to_string(g.h) + "x" + std::to_string(g.w) + "c" + std::to_string(g.c) + "_k" +
             std::to_string(g.kh) + "s" + std::to_string(g.stride) + "p" + std::to_string(g.pad);
    });

TEST(MaxPoolByHand, LargeWindowsAndAveragePoolingStayOnOneDnn) {
  EXPECT_FALSE(max_pool_by_hand(PoolGeometry::global(1, 32, 32, 8, PoolKind::kMax)));
  EXPECT_FALSE(max_pool_by_hand(PoolGeometry{1, 4, 4, 8, PoolKind::kAvg, 2, 2, 2, 0}));
}

}  // namespace
}  // namespace torus::worker::cpu

// The CPU backend's hand-written batch norm (worker/backend/cpu/batch_norm.cc), through the backend interface,
// against a double-precision reference: forward (y, saved mean and biased variance), the running statistics
// (unbiased variance), backward (dx, dgamma, dbeta), with and without the fused ReLU, on channel counts with and
// without a compile-time row width, row counts off every vector width, inputs whose mean is large next to their
// spread (the moments' shift), and 1 and 2 threads (the parallel split merges per-thread sums). CTest also runs it
// under ONEDNN_MAX_CPU_ISA=AVX2, which selects the AVX2 path here as on an AVX2 machine. The fused batch norm + 2x2
// max pool (Backend::norm_max_pool_*) against the backend's two ops in sequence.
#include "worker/backend/cpu/batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/math.h"

namespace torus::worker::cpu {
namespace {

struct Case {
  int64_t n, h, w, c;
  bool relu;
  int threads;
};

struct Reference {
  std::vector<double> y, mean, var, dx, dgamma, dbeta;
};

// Textbook batch norm in double, one channel at a time.
Reference reference(const Case& k, const std::vector<float>& x, const std::vector<float>& dy,
                    const std::vector<float>& gamma, const std::vector<float>& beta, double eps) {
  const int64_t rows = k.n * k.h * k.w, c = k.c;
  Reference r{std::vector<double>(x.size()), std::vector<double>(c), std::vector<double>(c),
              std::vector<double>(x.size()), std::vector<double>(c), std::vector<double>(c)};
  for (int64_t j = 0; j < c; ++j) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < rows; ++i) sum += x[i * c + j];
    r.mean[j] = sum / rows;
    for (int64_t i = 0; i < rows; ++i) sq += (x[i * c + j] - r.mean[j]) * (x[i * c + j] - r.mean[j]);
    r.var[j] = sq / rows;
    const double rstd = 1 / std::sqrt(r.var[j] + eps);
    double sum_g = 0, sum_gxhat = 0;
    std::vector<double> g(rows), xhat(rows);
    for (int64_t i = 0; i < rows; ++i) {
      xhat[i] = (x[i * c + j] - r.mean[j]) * rstd;
      const double y = gamma[j] * xhat[i] + beta[j];
      r.y[i * c + j] = k.relu && y <= 0 ? 0 : y;
      g[i] = k.relu && y <= 0 ? 0 : dy[i * c + j];
      sum_g += g[i];
      sum_gxhat += g[i] * xhat[i];
    }
    r.dbeta[j] = sum_g;
    r.dgamma[j] = sum_gxhat;
    for (int64_t i = 0; i < rows; ++i)
      r.dx[i * c + j] = gamma[j] * rstd * (g[i] - sum_g / rows - xhat[i] * sum_gxhat / rows);
  }
  return r;
}

std::vector<float> random(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// Sums over many rows carry more rounding than single elements: the tolerance scales with the row count's root.
void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tolerance, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

NormGeometry geometry(const Case& k) {
  return {.n = k.n,
          .h = k.h,
          .w = k.w,
          .c = k.c,
          .eps = 1e-5f,
          .activation = k.relu ? Activation::kRelu : Activation::kNone};
}

class HandBatchNorm : public ::testing::TestWithParam<Case> {};

TEST_P(HandBatchNorm, MatchesTheDoubleReference) {
  const Case k = GetParam();
  const NormGeometry g = geometry(k);
  ASSERT_TRUE(batch_norm_by_hand(g));
  std::mt19937 rng(static_cast<unsigned>(k.c * 131 + k.n));
  const size_t numel = static_cast<size_t>(g.shape().numel()), c = static_cast<size_t>(k.c);
  // A mean of 4 against a spread of 1: moments taken about zero in float would lose digits of the variance.
  std::vector<float> x = random(rng, numel, 3, 5), dy = random(rng, numel, -1, 1), gamma = random(rng, c, 0.5, 1.5),
                     beta = random(rng, c, -0.5, 0.5), running_mean = random(rng, c, -1, 1),
                     running_var = random(rng, c, 0.5, 2);
  const std::vector<float> running_mean0 = running_mean, running_var0 = running_var;
  std::vector<float> y(numel), mean(c), var(c), dx(numel), dgamma(c), dbeta(c);
  auto backend = make_cpu_backend(k.threads);
  ASSERT_EQ(backend->norm_workspace_bytes(g), 0u);  // the ReLU mask is recomputed, not kept
  const Shape s = g.shape(), cs{k.c};
  constexpr float kMomentum = 0.1f;
  backend->norm_forward_training(g, Tensor(x.data(), s), Tensor(gamma.data(), cs), Tensor(beta.data(), cs),
                                 Tensor(y.data(), s), Tensor(mean.data(), cs), Tensor(var.data(), cs),
                                 Tensor(running_mean.data(), cs), Tensor(running_var.data(), cs), kMomentum, Tensor());
  backend->norm_backward(g, Tensor(x.data(), s), Tensor(dy.data(), s), Tensor(gamma.data(), cs),
                         Tensor(beta.data(), cs), Tensor(mean.data(), cs), Tensor(var.data(), cs), Tensor(),
                         Tensor(dx.data(), s), Tensor(dgamma.data(), cs), Tensor(dbeta.data(), cs));
  const Reference r = reference(k, x, dy, gamma, beta, g.eps);
  const double rows = static_cast<double>(k.n * k.h * k.w), sum_tolerance = 1e-5 * std::sqrt(rows);
  expect_near(y, r.y, 1e-4, "y");
  expect_near(mean, r.mean, 1e-5, "save_mean");
  expect_near(var, r.var, 1e-4, "save_var (biased)");
  expect_near(dx, r.dx, 1e-4, "dx");
  expect_near(dgamma, r.dgamma, sum_tolerance, "dgamma");
  expect_near(dbeta, r.dbeta, sum_tolerance, "dbeta");
  std::vector<double> want_rm(c), want_rv(c);
  for (size_t j = 0; j < c; ++j) {
    want_rm[j] = (1 - kMomentum) * running_mean0[j] + kMomentum * r.mean[j];
    want_rv[j] = (1 - kMomentum) * running_var0[j] + kMomentum * r.var[j] * rows / (rows - 1);
  }
  expect_near(running_mean, want_rm, 1e-5, "running_mean");
  expect_near(running_var, want_rv, 1e-4, "running_var (unbiased)");
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t c : {1, 3, 8, 16, 24, 32})
    for (bool relu : {false, true}) {
      all.push_back({3, 5, 7, c, relu, 1});    // 105 rows: off every vector width
      all.push_back({8, 33, 33, c, relu, 2});  // 8712 rows: the parallel split where c >= 8
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(NarrowNhwc, HandBatchNorm, ::testing::ValuesIn(cases()), [](const auto& param_info) {
  const Case& k = param_info.param;
  return "n" + std::to_string(k.n) + "_hw" + std::to_string(k.h) + "x" + std::to_string(k.w) + "_c" +
         std::to_string(k.c) + (k.relu ? "_relu" : "") + "_t" + std::to_string(k.threads);
});

class HandBatchNormMaxPool : public ::testing::TestWithParam<Case> {};

// The fused op against norm_forward_training + pool_forward, and pool_backward + norm_backward: the same y and
// statistics bit for bit (the same arithmetic), and the same gradients up to the order of the sums. With ties, x
// takes 9 values only, so most windows hold equal maxima and only the first of them may take the gradient.
void expect_fused_matches_the_two_ops(const Case& k, bool ties);

TEST_P(HandBatchNormMaxPool, MatchesBatchNormThenMaxPool) { expect_fused_matches_the_two_ops(GetParam(), false); }
TEST_P(HandBatchNormMaxPool, MatchesBatchNormThenMaxPoolWhereWindowsHoldTies) {
  expect_fused_matches_the_two_ops(GetParam(), true);
}

void expect_fused_matches_the_two_ops(const Case& k, bool ties) {
  const NormGeometry g = geometry(k);
  const PoolGeometry pg{.n = k.n, .h = k.h, .w = k.w, .c = k.c, .kind = PoolKind::kMax, .kh = 2, .kw = 2, .stride = 2};
  auto backend = make_cpu_backend(k.threads);
  ASSERT_TRUE(backend->has_norm_max_pool(g));
  std::mt19937 rng(static_cast<unsigned>(k.c * 7 + k.h));
  const size_t numel = static_cast<size_t>(g.shape().numel()), c = static_cast<size_t>(k.c);
  const size_t pooled = static_cast<size_t>(k.n * (k.h / 2) * (k.w / 2) * k.c);
  // Values around zero, so the ReLU clamps some windows whole (ties among zeros) and passes others.
  std::vector<float> x = random(rng, numel, -2, 2), dy = random(rng, pooled, -1, 1), gamma = random(rng, c, 0.5, 1.5),
                     beta = random(rng, c, -0.5, 0.5);
  if (ties) {
    for (float& v : x) v = std::round(v * 2) / 2;
  }
  const Shape s = g.shape(), ps = pg.output_shape(), cs{k.c};
  const auto t = [](std::vector<float>& v, Shape shape) { return Tensor(v.data(), shape); };
  // The two ops.
  std::vector<float> y(numel), pooled_y(pooled), mean(c), var(c), rm(c, 0.0f), rv(c, 1.0f), dpool(numel), dx(numel),
      dgamma(c), dbeta(c);
  std::vector<float> ws((backend->pool_workspace_bytes(pg) + 3) / 4 + 1);  // bytes, as float-sized scratch
  backend->norm_forward_training(g, t(x, s), t(gamma, cs), t(beta, cs), t(y, s), t(mean, cs), t(var, cs), t(rm, cs),
                                 t(rv, cs), 0.1f, Tensor());
  const Tensor workspace(ws.data(), {static_cast<int64_t>(ws.size())});
  backend->pool_forward(pg, t(y, s), t(pooled_y, ps), workspace);
  backend->pool_backward(pg, t(dy, ps), workspace, t(dpool, s));
  backend->norm_backward(g, t(x, s), t(dpool, s), t(gamma, cs), t(beta, cs), t(mean, cs), t(var, cs), Tensor(),
                         t(dx, s), t(dgamma, cs), t(dbeta, cs));
  // Fused.
  std::vector<float> fy(pooled), fmean(c), fvar(c), frm(c, 0.0f), frv(c, 1.0f), fdx(numel, -7.0f), fdgamma(c),
      fdbeta(c);
  backend->norm_max_pool_forward_training(g, t(x, s), t(gamma, cs), t(beta, cs), t(fy, ps), t(fmean, cs), t(fvar, cs),
                                          t(frm, cs), t(frv, cs), 0.1f);
  backend->norm_max_pool_backward(g, t(x, s), t(dy, ps), t(gamma, cs), t(beta, cs), t(fmean, cs), t(fvar, cs),
                                  t(fdx, s), t(fdgamma, cs), t(fdbeta, cs));
  EXPECT_EQ(fy, pooled_y);
  EXPECT_EQ(fmean, mean);
  EXPECT_EQ(fvar, var);
  EXPECT_EQ(frm, rm);
  EXPECT_EQ(frv, rv);
  const auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const double sum_tolerance = 1e-5 * std::sqrt(static_cast<double>(numel / c));
  expect_near(fdx, as_double(dx), 1e-4, "dx (every input, those outside the windows too)");
  expect_near(fdgamma, as_double(dgamma), sum_tolerance, "dgamma");
  expect_near(fdbeta, as_double(dbeta), sum_tolerance, "dbeta");
}

std::vector<Case> pool_cases() {
  std::vector<Case> all;
  for (int64_t c : {1, 3, 8, 16, 32})
    for (bool relu : {false, true}) {
      all.push_back({3, 6, 8, c, relu, 1});  // even sides
      all.push_back({2, 7, 9, c, relu, 2});  // odd sides: a last row and column outside every window
    }
  all.push_back({16, 28, 28, 16, true, 2});  // the narrow ResNet-9's first pool, split between threads
  return all;
}

INSTANTIATE_TEST_SUITE_P(NarrowNhwc, HandBatchNormMaxPool, ::testing::ValuesIn(pool_cases()),
                         [](const auto& param_info) {
                           const Case& k = param_info.param;
                           return "n" + std::to_string(k.n) + "_hw" + std::to_string(k.h) + "x" + std::to_string(k.w) +
                                  "_c" + std::to_string(k.c) + (k.relu ? "_relu" : "") + "_t" +
                                  std::to_string(k.threads);
                         });

TEST(HandBatchNormChoice, NarrowNhwcOnlyWideAndBlockedStayOnOneDnn) {
  EXPECT_TRUE(batch_norm_by_hand({.n = 2, .h = 4, .w = 4, .c = 1}));
  EXPECT_TRUE(batch_norm_by_hand({.n = 2, .h = 4, .w = 4, .c = 32}));
  EXPECT_FALSE(batch_norm_by_hand({.n = 2, .h = 4, .w = 4, .c = 33}));
  EXPECT_FALSE(batch_norm_by_hand({.n = 2, .h = 4, .w = 4, .c = 64}));
  EXPECT_TRUE(batch_norm_max_pool_by_hand({.n = 2, .h = 2, .w = 2, .c = 16}));
  EXPECT_FALSE(batch_norm_max_pool_by_hand({.n = 2, .h = 1, .w = 4, .c = 16}));  // no window fits
  EXPECT_FALSE(batch_norm_max_pool_by_hand({.n = 2, .h = 4, .w = 4, .c = 64}));
  // Asked anyway, the backend refuses rather than running the NHWC loops on another layout.
  auto backend = make_cpu_backend(1);
  const NormGeometry wide{.n = 1, .h = 2, .w = 2, .c = 64};
  std::vector<float> buf(256);
  const Tensor t(buf.data(), {256});
  EXPECT_FALSE(backend->has_norm_max_pool(wide));
  EXPECT_THROW(backend->norm_max_pool_forward_training(wide, t, t, t, t, t, t, t, t, 0.1f), InvalidArgument);
  EXPECT_THROW(backend->norm_max_pool_backward(wide, t, t, t, t, t, t, t, t, t), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::cpu

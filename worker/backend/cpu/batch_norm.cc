#include "worker/backend/cpu/batch_norm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "worker/backend/cpu/staging.h"
#include "worker/backend/cpu/vec.h"
#include "worker/backend/math.h"

// This file is compiled with -ffp-contract=off (CMakeLists.txt): the backward recomputes the forward's ReLU mask
// from x * a + b, which must round the same in both passes and on every ISA path, so no multiply-add is fused.

// Functions taking or returning AVX vectors are always inlined into the wrapper of their ISA (rows_avx2,
// rows_avx512): no vector ever crosses a call, so GCC's note that such a call's ABI depends on the ISA is moot.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torus::worker::cpu {
namespace {

// Parallel over rows when there is enough work for threads to pay off.
constexpr int64_t kParallelElements = 1 << 16;
// Float partial sums are flushed into double every kChunkRows rows: vector-speed accumulation, bounded rounding.
constexpr int64_t kChunkRows = 64;
constexpr int kMaxLanes = 16;

using vec::lanes_for;
using vec::load;
using vec::store;
using vec::Vec;

// One pass over a range of rows. Pointers not used by a pass are null. The kPool passes (the fused 2x2 max pool)
// run over output rows (n * H/2 + oh) of an (N, h, w, C) input.
enum class Pass { kMoments, kNormalize, kGradSums, kGradInput, kPoolForward, kPoolGradSums, kPoolGradInput };
struct Job {
  Pass pass;
  bool relu;
  int64_t c;
  const float *x, *dy;
  float* out;                    // y or dx
  const float *mean, *a, *b;     // kMoments: mean holds the shift; a, b: the forward's y = x * a + b
  const float *coef_x, *coef_0;  // kGradInput: dx = a * g + coef_x * (x - mean) + coef_0
  int64_t h = 0, w = 0;          // kPool passes: the input's height and width
};

// The gradient reaching the normalization: dy, zero where the fused ReLU clamped (y = x * a + b <= 0).
template <int V, bool kRelu>
[[gnu::always_inline]] inline Vec<V> masked(Vec<V> dy, Vec<V> x, Vec<V> a, Vec<V> b) {
  if constexpr (!kRelu) return dy;
  const Vec<V> zero{};
  return x * a + b > zero ? dy : zero;
}

// Sums over rows [begin, end) per channel, added into s0 and s1 (double): kMoments sums d = x - shift and d * d,
// kGradSums sums g and g * (x - mean).
template <int64_t kC, int V, bool kRelu, bool kMoments>
[[gnu::always_inline]] inline void sums_rows(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  const int64_t c = kC ? kC : j.c, k = c / V;
  Vec<V> m[kHandMaxChannels / V] = {}, a[kHandMaxChannels / V] = {}, b[kHandMaxChannels / V] = {};
  for (int64_t i = 0; i < k; ++i) {
    m[i] = load<V>(j.mean + i * V);
    if (!kMoments) a[i] = load<V>(j.a + i * V), b[i] = load<V>(j.b + i * V);
  }
  for (int64_t r0 = begin; r0 < end; r0 += kChunkRows) {
    Vec<V> p0[kHandMaxChannels / V] = {}, p1[kHandMaxChannels / V] = {};
    const int64_t r1 = std::min(end, r0 + kChunkRows);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t i = 0; i < k; ++i) {
        const Vec<V> x = load<V>(j.x + r * c + i * V), d = x - m[i];
        const Vec<V> g = kMoments ? d : masked<V, kRelu>(load<V>(j.dy + r * c + i * V), x, a[i], b[i]);
        p0[i] += g;
        p1[i] += g * d;
      }
    float f0[kHandMaxChannels], f1[kHandMaxChannels];
    for (int64_t i = 0; i < k; ++i) store<V>(f0 + i * V, p0[i]), store<V>(f1 + i * V, p1[i]);
    for (int64_t i = 0; i < c; ++i) s0[i] += f0[i], s1[i] += f1[i];
  }
}

// The elementwise passes over rows [begin, end): y = relu?(x * a + b), or dx.
template <int64_t kC, int V, bool kRelu, bool kInput>
[[gnu::always_inline]] inline void map_rows(const Job& j, int64_t begin, int64_t end) {
  const int64_t c = kC ? kC : j.c, k = c / V;
  Vec<V> a[kHandMaxChannels / V] = {}, b[kHandMaxChannels / V] = {}, m[kHandMaxChannels / V] = {},
                              cx[kHandMaxChannels / V] = {}, c0[kHandMaxChannels / V] = {};
  constexpr bool input = kInput;
  for (int64_t i = 0; i < k; ++i) {
    a[i] = load<V>(j.a + i * V), b[i] = load<V>(j.b + i * V);
    if (input) m[i] = load<V>(j.mean + i * V), cx[i] = load<V>(j.coef_x + i * V), c0[i] = load<V>(j.coef_0 + i * V);
  }
  const Vec<V> zero{};
  for (int64_t r = begin; r < end; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const Vec<V> x = load<V>(j.x + r * c + i * V);
      Vec<V> out;
      if constexpr (input) {
        const Vec<V> g = masked<V, kRelu>(load<V>(j.dy + r * c + i * V), x, a[i], b[i]);
        out = a[i] * g + cx[i] * (x - m[i]) + c0[i];
      } else {
        out = x * a[i] + b[i];
        if (kRelu) out = out > zero ? out : zero;
      }
      store<V>(j.out + r * c + i * V, out);
    }
}

// The fused pool's passes over output rows [begin, end). Each window's four pre-activations u = x * a + b are
// computed as kNormalize computes them; since the ReLU and every rounding are monotonic, the pooled activation is
// relu(max u), bit for bit the maximum of the four activations. The winner is the first maximum in row order (as
// max_pool.h's): where max u > 0 that is the first u equal to it, and where it is not (kRelu) the window passes no
// gradient, so the backward recomputes it from x alone and only the winner's input takes dy. Inputs outside every
// window (the last row or column of an odd size) get no gradient from the pool.
// Masks are combined as bits (GCC 12 splits a select on a computed int vector into lanes: 20x slower).
template <int V>
using Bits = typename vec::BitsOf<V>::type;

template <int64_t kC, int V, bool kRelu, Pass kPass>
[[gnu::always_inline]] inline void pool_rows(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  const int64_t c = kC ? kC : j.c, k = c / V, oh_n = j.h / 2, ow_n = j.w / 2, row_floats = j.w * c;
  Vec<V> a[kHandMaxChannels / V] = {}, b[kHandMaxChannels / V] = {}, m[kHandMaxChannels / V] = {},
                              cx[kHandMaxChannels / V] = {}, c0[kHandMaxChannels / V] = {};
  for (int64_t i = 0; i < k; ++i) {
    a[i] = load<V>(j.a + i * V), b[i] = load<V>(j.b + i * V);
    if (kPass != Pass::kPoolForward) m[i] = load<V>(j.mean + i * V);
    if (kPass == Pass::kPoolGradInput) cx[i] = load<V>(j.coef_x + i * V), c0[i] = load<V>(j.coef_0 + i * V);
  }
  const Vec<V> zero{};
  for (int64_t row = begin; row < end; ++row) {
    const int64_t n = row / oh_n, oh = row % oh_n;
    const float* x0 = j.x + (n * j.h + 2 * oh) * row_floats;
    const float* x1 = x0 + row_floats;
    Vec<V> p0[kHandMaxChannels / V] = {}, p1[kHandMaxChannels / V] = {};
    for (int64_t ow = 0; ow < ow_n; ++ow)
      for (int64_t i = 0; i < k; ++i) {
        const int64_t at = 2 * ow * c + i * V;
        const Vec<V> xs[4] = {load<V>(x0 + at), load<V>(x0 + at + c), load<V>(x1 + at), load<V>(x1 + at + c)};
        Vec<V> u[4];
        for (int q = 0; q < 4; ++q) u[q] = xs[q] * a[i] + b[i];
        Vec<V> top = u[0];
        for (int q = 1; q < 4; ++q) top = u[q] > top ? u[q] : top;
        const int64_t out = (row * ow_n + ow) * c + i * V;
        if constexpr (kPass == Pass::kPoolForward) {
          store<V>(j.out + out, kRelu ? (top > zero ? top : zero) : top);
          continue;
        }
        const Vec<V> d = load<V>(j.dy + out);
        const Vec<V> g = kRelu ? (top > zero ? d : zero) : d;
        if constexpr (kPass == Pass::kPoolGradSums) {
          Vec<V> won = xs[3];  // the first maximum's input
          for (int q = 2; q >= 0; --q) won = u[q] >= top ? xs[q] : won;
          p0[i] += g;
          p1[i] += g * (won - m[i]);
        } else {
          const Bits<V> e0 = u[0] >= top, e1 = u[1] >= top, e2 = u[2] >= top, e01 = e0 | e1;
          const Bits<V> first[4] = {e0, e1 & ~e0, e2 & ~e01, ~(e01 | e2)};
          const Bits<V> ag = reinterpret_cast<Bits<V>>(a[i] * g);
          for (int q = 0; q < 4; ++q) {
            float* dx = j.out + (n * j.h + 2 * oh + q / 2) * row_floats + at + (q % 2) * c;
            store<V>(dx, cx[i] * (xs[q] - m[i]) + c0[i] + reinterpret_cast<Vec<V>>(ag & first[q]));
          }
        }
      }
    if constexpr (kPass == Pass::kPoolGradSums) {
      float f0[kHandMaxChannels], f1[kHandMaxChannels];
      for (int64_t i = 0; i < k; ++i) store<V>(f0 + i * V, p0[i]), store<V>(f1 + i * V, p1[i]);
      for (int64_t i = 0; i < c; ++i) s0[i] += f0[i], s1[i] += f1[i];
    }
    if constexpr (kPass == Pass::kPoolGradInput) {
      // Inputs outside every window (dy = 0): the last column of both rows, and after the last window row of an
      // image of odd height, its last row. (A loop, not a lambda: a lambda would not inherit the ISA's target.)
      const int64_t rows = j.h % 2 != 0 && oh == oh_n - 1 ? 3 : 2;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x0 + r * row_floats;
        float* dxr = j.out + (n * j.h + 2 * oh + r) * row_floats;
        for (int64_t col = r < 2 ? 2 * ow_n : 0; col < j.w; ++col)
          for (int64_t i = 0; i < k; ++i)
            store<V>(dxr + col * c + i * V, cx[i] * (load<V>(xr + col * c + i * V) - m[i]) + c0[i]);
      }
    }
  }
}

template <int64_t kC, int V, bool kRelu>
[[gnu::always_inline]] inline void pass_rows(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  switch (j.pass) {
    case Pass::kMoments:
      return sums_rows<kC, V, kRelu, true>(j, begin, end, s0, s1);
    case Pass::kGradSums:
      return sums_rows<kC, V, kRelu, false>(j, begin, end, s0, s1);
    case Pass::kNormalize:
      return map_rows<kC, V, kRelu, false>(j, begin, end);
    case Pass::kGradInput:
      return map_rows<kC, V, kRelu, true>(j, begin, end);
    case Pass::kPoolForward:
      return pool_rows<kC, V, kRelu, Pass::kPoolForward>(j, begin, end, s0, s1);
    case Pass::kPoolGradSums:
      return pool_rows<kC, V, kRelu, Pass::kPoolGradSums>(j, begin, end, s0, s1);
    case Pass::kPoolGradInput:
      return pool_rows<kC, V, kRelu, Pass::kPoolGradInput>(j, begin, end, s0, s1);
  }
}

// Channel counts the narrow ResNets use get a compile-time row width (loops unrolled, sums in registers).
// (No lambdas here: a lambda would not inherit the ISA wrapper's target attribute.)
template <int64_t kC, int kLanes>
[[gnu::always_inline]] inline void rows_c(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  constexpr int V = lanes_for(kC, kLanes);
  if (j.relu) return pass_rows<kC, V, true>(j, begin, end, s0, s1);
  pass_rows<kC, V, false>(j, begin, end, s0, s1);
}

template <int kLanes>
[[gnu::always_inline]] inline void rows_isa(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  switch (j.c) {
    case 8:
      return rows_c<8, kLanes>(j, begin, end, s0, s1);
    case 16:
      return rows_c<16, kLanes>(j, begin, end, s0, s1);
    case 24:
      return rows_c<24, kLanes>(j, begin, end, s0, s1);
    case 32:
      return rows_c<32, kLanes>(j, begin, end, s0, s1);
    default:
      return rows_c<0, kLanes>(j, begin, end, s0, s1);
  }
}

void rows_baseline(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  rows_isa<4>(j, begin, end, s0, s1);
}
__attribute__((target("avx2"))) void rows_avx2(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  rows_isa<8>(j, begin, end, s0, s1);
}
__attribute__((target("avx512f"))) void rows_avx512(const Job& j, int64_t begin, int64_t end, double* s0, double* s1) {
  rows_isa<kMaxLanes>(j, begin, end, s0, s1);
}

using RowsFn = void (*)(const Job&, int64_t, int64_t, double*, double*);

// The widest path this CPU runs; AVX-512 only where oneDNN runs avx512_core, so ONEDNN_MAX_CPU_ISA=AVX2 (CTest's
// ALSO_ISA runs) takes the AVX2 path here as an AVX2 machine would.
RowsFn rows_fn() {
  static const RowsFn fn = [] {
    if (__builtin_cpu_supports("avx512f") && channel_block() == 16) return &rows_avx512;
    if (__builtin_cpu_supports("avx2")) return &rows_avx2;
    return &rows_baseline;
  }();
  return fn;
}

// Runs a pass over all rows, split in contiguous ranges, one per thread; each range's sums (2 * C doubles) are
// merged in range order, so the result depends on the thread count only.
void run(const Job& j, int64_t rows, double* s0, double* s1) {
  const RowsFn fn = rows_fn();
  const int threads = rows * j.c >= kParallelElements ? std::max(1, omp_get_max_threads()) : 1;
  if (threads == 1) return fn(j, 0, rows, s0, s1);
  std::vector<double> part(static_cast<size_t>(threads) * 2 * j.c, 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    double* mine = part.data() + t * 2 * j.c;
    fn(j, rows * t / n, rows * (t + 1) / n, mine, mine + j.c);
  }
  if (s0 == nullptr) return;
  for (int t = 0; t < threads; ++t)
    for (int64_t c = 0; c < j.c; ++c) s0[c] += part[(t * 2) * j.c + c], s1[c] += part[(t * 2 + 1) * j.c + c];
}

// The forward's affine map y = x * a + b per channel, from the saved statistics (float, as both passes see them).
void affine(const NormGeometry& g, const float* gamma, const float* beta, const float* mean, const float* var, float* a,
            float* b) {
  for (int64_t c = 0; c < g.c; ++c) {
    a[c] = gamma[c] * math::invstd_from_var(var[c], g.eps);
    b[c] = beta[c] - mean[c] * a[c];
  }
}

// The batch's mean and biased variance into save_mean and save_var.
void moments(const NormGeometry& g, const float* x, float* save_mean, float* save_var) {
  const int64_t rows = g.rows(), c = g.c;
  // Moments about the first row's values: no cancellation when the mean is large next to the spread.
  float shift[kHandMaxChannels];
  std::copy_n(x, c, shift);
  double d[kHandMaxChannels] = {}, d2[kHandMaxChannels] = {};
  run({Pass::kMoments, false, c, x, nullptr, nullptr, shift, nullptr, nullptr, nullptr, nullptr}, rows, d, d2);
  for (int64_t i = 0; i < c; ++i) {
    const double mean_d = d[i] / static_cast<double>(rows);
    save_mean[i] = static_cast<float>(shift[i] + mean_d);
    save_var[i] = static_cast<float>(std::max(0.0, d2[i] / static_cast<double>(rows) - mean_d * mean_d));
  }
}

// The backward's coefficients: dx = a * g + coef_x * (x - mean) + coef_0, from the sums of g and g * (x - mean).
void grad_coefficients(const NormGeometry& g, const float* a, const float* save_var, const double* sum_g,
                       const double* sum_gx, float* coef_x, float* coef_0, float* dgamma, float* dbeta) {
  // dx = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)), xhat = (x - mean) * rstd.
  for (int64_t i = 0; i < g.c; ++i) {
    const double rstd = math::invstd_from_var(save_var[i], g.eps), m = static_cast<double>(g.rows());
    dbeta[i] = static_cast<float>(sum_g[i]);
    dgamma[i] = static_cast<float>(sum_gx[i] * rstd);
    coef_x[i] = static_cast<float>(-a[i] * rstd * rstd * sum_gx[i] / m);
    coef_0[i] = static_cast<float>(-a[i] * sum_g[i] / m);
  }
}

}  // namespace

bool batch_norm_by_hand(const NormGeometry& g) { return g.c <= kHandMaxChannels && !blocked_channels(g.c); }

void batch_norm_forward_training(const NormGeometry& g, const float* x, const float* gamma, const float* beta, float* y,
                                 float* save_mean, float* save_var) {
  float a[kHandMaxChannels], b[kHandMaxChannels];
  moments(g, x, save_mean, save_var);
  affine(g, gamma, beta, save_mean, save_var, a, b);
  const bool relu = g.activation == Activation::kRelu;
  run({Pass::kNormalize, relu, g.c, x, nullptr, y, nullptr, a, b, nullptr, nullptr}, g.rows(), nullptr, nullptr);
}

void batch_norm_backward(const NormGeometry& g, const float* x, const float* dy, const float* gamma, const float* beta,
                         const float* save_mean, const float* save_var, float* dx, float* dgamma, float* dbeta) {
  const bool relu = g.activation == Activation::kRelu;
  float a[kHandMaxChannels], b[kHandMaxChannels], coef_x[kHandMaxChannels], coef_0[kHandMaxChannels];
  affine(g, gamma, beta, save_mean, save_var, a, b);
  double sum_g[kHandMaxChannels] = {}, sum_gx[kHandMaxChannels] = {};
  run({Pass::kGradSums, relu, g.c, x, dy, nullptr, save_mean, a, b, nullptr, nullptr}, g.rows(), sum_g, sum_gx);
  grad_coefficients(g, a, save_var, sum_g, sum_gx, coef_x, coef_0, dgamma, dbeta);
  run({Pass::kGradInput, relu, g.c, x, dy, dx, save_mean, a, b, coef_x, coef_0}, g.rows(), nullptr, nullptr);
}

bool batch_norm_max_pool_by_hand(const NormGeometry& g) { return batch_norm_by_hand(g) && g.h >= 2 && g.w >= 2; }

void batch_norm_max_pool_forward_training(const NormGeometry& g, const float* x, const float* gamma, const float* beta,
                                          float* y, float* save_mean, float* save_var) {
  float a[kHandMaxChannels], b[kHandMaxChannels];
  moments(g, x, save_mean, save_var);
  affine(g, gamma, beta, save_mean, save_var, a, b);
  const bool relu = g.activation == Activation::kRelu;
  const int64_t out_rows = g.n * (g.h / 2);
  run({Pass::kPoolForward, relu, g.c, x, nullptr, y, nullptr, a, b, nullptr, nullptr, g.h, g.w}, out_rows, nullptr,
      nullptr);
}

void batch_norm_max_pool_backward(const NormGeometry& g, const float* x, const float* dy, const float* gamma,
                                  const float* beta, const float* save_mean, const float* save_var, float* dx,
                                  float* dgamma, float* dbeta) {
  const bool relu = g.activation == Activation::kRelu;
  float a[kHandMaxChannels], b[kHandMaxChannels], coef_x[kHandMaxChannels], coef_0[kHandMaxChannels];
  affine(g, gamma, beta, save_mean, save_var, a, b);
  double sum_g[kHandMaxChannels] = {}, sum_gx[kHandMaxChannels] = {};
  const int64_t out_rows = g.n * (g.h / 2);
  run({Pass::kPoolGradSums, relu, g.c, x, dy, nullptr, save_mean, a, b, nullptr, nullptr, g.h, g.w}, out_rows, sum_g,
      sum_gx);
  grad_coefficients(g, a, save_var, sum_g, sum_gx, coef_x, coef_0, dgamma, dbeta);
  run({Pass::kPoolGradInput, relu, g.c, x, dy, dx, save_mean, a, b, coef_x, coef_0, g.h, g.w}, out_rows, nullptr,
      nullptr);
}

}  // namespace torus::worker::cpu

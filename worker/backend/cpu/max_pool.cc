#include "worker/backend/cpu/max_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace torus::worker::cpu {
namespace {

// Parallel over (n, output row) when there is enough work for threads to pay off.
constexpr int64_t kParallelElements = 1 << 16;

// Four channels per vector (GCC vector extensions: one SSE register, the baseline x86-64 build).
constexpr int64_t kLanes = 4;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
using Bytes = uint8_t __attribute__((vector_size(kLanes)));

Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
void store(float* p, Floats v) { std::memcpy(p, &v, sizeof(v)); }
Ints load_bytes(const uint8_t* p) {
  Bytes b;
  std::memcpy(&b, p, sizeof(b));
  return __builtin_convertvector(b, Ints);
}
void store_bytes(uint8_t* p, Ints v) {
  const Bytes b = __builtin_convertvector(v, Bytes);
  std::memcpy(p, &b, sizeof(b));
}

struct Window {
  int64_t h0, w0;              // top-left corner, padding included (may be negative)
  int64_t h_begin, h_end;      // rows inside the image
  int64_t w_begin, w_end;      // columns inside the image
};

Window window(const PoolGeometry& g, int64_t oh, int64_t ow) {
  Window win{};
  win.h0 = oh * g.stride - g.pad;
  win.w0 = ow * g.stride - g.pad;
  win.h_begin = std::max<int64_t>(win.h0, 0);
  win.h_end = std::min(win.h0 + g.kh, g.h);
  win.w_begin = std::max<int64_t>(win.w0, 0);
  win.w_end = std::min(win.w0 + g.kw, g.w);
  return win;
}

// The common pool (2x2, stride 2, no padding) with AVX2 when the CPU has it: eight channels per vector, the four
// window positions unrolled, no window arithmetic. Rows are flattened (n, output row) pairs in [begin, end).
using Floats8 = float __attribute__((vector_size(32)));
using Ints8 = int32_t __attribute__((vector_size(32)));

bool pool2x2_avx2(const PoolGeometry& g) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 && g.kh == 2 && g.kw == 2 && g.stride == 2 && g.pad == 0;
}

// Window positions (0-3) between eight int32 lanes and eight bytes. __builtin_convertvector did this one lane at a
// time (GCC 12: 16 extracts and shifts per vector, most of the 2x2 pool's time); these are two packs or one widen.
__attribute__((target("avx2"))) inline void store_positions(uint8_t* p, Ints8 k) {
  const __m256i v = reinterpret_cast<__m256i>(k);
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(words, words));
}
__attribute__((target("avx2"))) inline Ints8 load_positions(const uint8_t* p) {
  return reinterpret_cast<Ints8>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
__attribute__((target("avx2"))) inline Floats8 load8(const float* p) {
  Floats8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
// The first maximum wins: a later position replaces the best only where strictly greater.
__attribute__((target("avx2"))) inline void keep_max(Floats8& best, Ints8& k, Floats8 v, int32_t position) {
  const Ints8 more = v > best;
  best = more ? v : best;
  k = more ? position - Ints8{} : k;
}

__attribute__((target("avx2"))) void pool2x2_forward_rows(const PoolGeometry& g, const float* x, float* y,
                                                          uint8_t* workspace, int64_t begin, int64_t end) {
  const int64_t c = g.c, oh_n = g.out_h(), ow_n = g.out_w(), row = g.w * c;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / oh_n, oh = r % oh_n;
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      const float* p = x + ((n * g.h + 2 * oh) * g.w + 2 * ow) * c;
      const float* at[4] = {p, p + c, p + row, p + row + c};
      float* yp = y + (r * ow_n + ow) * c;
      uint8_t* wp = workspace + (r * ow_n + ow) * c;
      int64_t i = 0;
      for (; i + 8 <= c; i += 8) {
        // The window unrolled: GCC 12 at -O2 kept a loop over `at` (loaded from the stack).
        Floats8 best = load8(at[0] + i);
        Ints8 k{};
        keep_max(best, k, load8(at[1] + i), 1);
        keep_max(best, k, load8(at[2] + i), 2);
        keep_max(best, k, load8(at[3] + i), 3);
        std::memcpy(yp + i, &best, sizeof(best));
        store_positions(wp + i, k);
      }
      for (; i < c; ++i) {
        float best = at[0][i];
        uint8_t k = 0;
        for (uint8_t j = 1; j < 4; ++j)
          if (at[j][i] > best) {
            best = at[j][i];
            k = j;
          }
        yp[i] = best;
        wp[i] = k;
      }
    }
  }
}

__attribute__((target("avx2"))) void pool2x2_backward_rows(const PoolGeometry& g, const float* dy,
                                                           const uint8_t* workspace, float* dx, int64_t begin,
                                                           int64_t end) {
  const int64_t c = g.c, oh_n = g.out_h(), ow_n = g.out_w(), row = g.w * c;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / oh_n, oh = r % oh_n;
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      float* p = dx + ((n * g.h + 2 * oh) * g.w + 2 * ow) * c;
      float* at[4] = {p, p + c, p + row, p + row + c};
      const float* dyp = dy + (r * ow_n + ow) * c;
      const uint8_t* wp = workspace + (r * ow_n + ow) * c;
      int64_t i = 0;
      for (; i + 8 <= c; i += 8) {
        const Floats8 grad = load8(dyp + i);
        const Ints8 k = load_positions(wp + i);
        for (int32_t j = 0; j < 4; ++j) {
          const Floats8 out = (k == j) ? grad : Floats8{};
          std::memcpy(at[j] + i, &out, sizeof(out));
        }
      }
      for (; i < c; ++i)
        for (uint8_t j = 0; j < 4; ++j) at[j][i] = wp[i] == j ? dyp[i] : 0.0f;
    }
  }
}

}  // namespace

bool max_pool_by_hand(const PoolGeometry& g) {
  return g.kind == PoolKind::kMax && g.kh * g.kw <= 256 && g.pad < g.kh && g.pad < g.kw;
}

size_t max_pool_workspace_bytes(const PoolGeometry& g) { return static_cast<size_t>(g.output_shape().numel()); }

void max_pool_forward(const PoolGeometry& g, const float* x, float* y, uint8_t* workspace) {
  const int64_t c = g.c, oh_n = g.out_h(), ow_n = g.out_w();
  const bool parallel = g.output_shape().numel() >= kParallelElements;
  if (pool2x2_avx2(g)) {
#pragma omp parallel for if (parallel)
    for (int64_t r = 0; r < g.n * oh_n; ++r) pool2x2_forward_rows(g, x, y, workspace, r, r + 1);
    return;
  }
#pragma omp parallel for collapse(2) if (parallel)
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const Window win = window(g, oh, ow);
        const int64_t out = ((n * oh_n + oh) * ow_n + ow) * c;
        const float* first = x + ((n * g.h + win.h_begin) * g.w + win.w_begin) * c;
        const auto first_k = static_cast<int32_t>((win.h_begin - win.h0) * g.kw + (win.w_begin - win.w0));
        // A vector of channels at a time, held in registers over the window; then the channels left over.
        int64_t i = 0;
        for (; i + kLanes <= c; i += kLanes) {
          Floats best = load(first + i);
          Ints at = first_k - Ints{};
          for (int64_t ih = win.h_begin; ih < win.h_end; ++ih)
            for (int64_t iw = win.w_begin; iw < win.w_end; ++iw) {
              const auto k = static_cast<int32_t>((ih - win.h0) * g.kw + (iw - win.w0));
              const Floats v = load(x + ((n * g.h + ih) * g.w + iw) * c + i);
              const Ints more = v > best;
              best = more ? v : best;
              at = more ? k - Ints{} : at;
            }
          store(y + out + i, best);
          store_bytes(workspace + out + i, at);
        }
        for (; i < c; ++i) {
          float best = first[i];
          int32_t at = first_k;
          for (int64_t ih = win.h_begin; ih < win.h_end; ++ih)
            for (int64_t iw = win.w_begin; iw < win.w_end; ++iw) {
              const float v = x[((n * g.h + ih) * g.w + iw) * c + i];
              if (v > best) {
                best = v;
                at = static_cast<int32_t>((ih - win.h0) * g.kw + (iw - win.w0));
              }
            }
          y[out + i] = best;
          workspace[out + i] = static_cast<uint8_t>(at);
        }
      }
}

void max_pool_backward(const PoolGeometry& g, const float* dy, const uint8_t* workspace, float* dx) {
  const int64_t c = g.c, oh_n = g.out_h(), ow_n = g.out_w();
  // Windows that neither overlap nor leave gaps write each input once; otherwise zero first and accumulate.
  const bool tiles = g.stride == g.kh && g.stride == g.kw && g.pad == 0 && oh_n * g.kh == g.h && ow_n * g.kw == g.w;
  if (!tiles) std::memset(dx, 0, static_cast<size_t>(g.input_shape().numel()) * sizeof(float));
  if (pool2x2_avx2(g)) {  // windows never overlap: each covered input is written once
#pragma omp parallel for if (g.input_shape().numel() >= kParallelElements)
    for (int64_t r = 0; r < g.n * oh_n; ++r) pool2x2_backward_rows(g, dy, workspace, dx, r, r + 1);
    return;
  }
  auto row = [&](int64_t n, int64_t oh) {
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      const Window win = window(g, oh, ow);
      const float* dyp = dy + ((n * oh_n + oh) * ow_n + ow) * c;
      const uint8_t* wp = workspace + ((n * oh_n + oh) * ow_n + ow) * c;
      for (int64_t ih = win.h_begin; ih < win.h_end; ++ih)
        for (int64_t iw = win.w_begin; iw < win.w_end; ++iw) {
          float* dxp = dx + ((n * g.h + ih) * g.w + iw) * c;
          const auto k = static_cast<int32_t>((ih - win.h0) * g.kw + (iw - win.w0));
          int64_t i = 0;
          for (; i + kLanes <= c; i += kLanes) {
            const Floats grad = (load_bytes(wp + i) == k) ? load(dyp + i) : Floats{};
            store(dxp + i, tiles ? grad : load(dxp + i) + grad);
          }
          for (; i < c; ++i) {
            const float grad = wp[i] == k ? dyp[i] : 0.0f;
            dxp[i] = tiles ? grad : dxp[i] + grad;
          }
        }
    }
  };
  const bool parallel = g.input_shape().numel() >= kParallelElements;
  if (g.stride >= g.kh) {  // output rows read disjoint input rows: they may run in parallel
#pragma omp parallel for collapse(2) if (parallel)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oh = 0; oh < oh_n; ++oh) row(n, oh);
  } else {
#pragma omp parallel for if (parallel)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oh = 0; oh < oh_n; ++oh) row(n, oh);
  }
}

}  // namespace torus::worker::cpu

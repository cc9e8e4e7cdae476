#pragma once
// fp32 <-> fp16 / bf16, the one implementation: round to nearest even, NaN stays NaN, overflow goes to infinity.
// TORUS_HD (__host__ __device__) and free of CUDA headers, so the CUDA kernels (kernel_math.h), the CPU
// all-reduce's compression (worker/comm/types.cc) and the plain-g++ tests (tests/worker/half_test.cc) run the
// same formula.
#include <cstdint>
#include <cstring>

#include "worker/backend/math.h"

namespace torus::worker::math {

// --- bit casts (device: intrinsics; host: memcpy) ----------------------------------------------------
TORUS_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TORUS_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

TORUS_HD inline uint16_t bf16_from_float(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

TORUS_HD inline float float_from_bf16(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Rounds `value >> shift` to nearest even on the dropped bits.
TORUS_HD inline uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

TORUS_HD inline uint16_t f16_from_float(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (a >= 0x38800000u) {                                              // normal half (|f| >= 2^-14)
    // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits; a carry correctly bumps the exponent.
    return static_cast<uint16_t>(sign | shift_round_even(a - 0x38000000u, 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds (to even) to zero
  // Subnormal half: value = m * 2^-24 with m = mantissa (implicit bit included) >> (126 - exponent).
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - (a >> 23);
  return static_cast<uint16_t>(sign | shift_round_even(mantissa, shift));
}

TORUS_HD inline float float_from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: m * 2^-24, exact in fp32
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace torus::worker::math

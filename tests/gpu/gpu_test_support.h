#pragma once
// What the GPU op tests share: inputs, the comparison (tests/support/close.h), device tensors with their memory, and
// the fixture that skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support/close.h"
#include "tests/worker/test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"

namespace torus::worker {
// Test names and failure messages print the dtype by name.
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace torus::worker

namespace torus::worker::cuda {

using testing::random_vector;  // tests/worker/test_util.h

// What the device stores for fp32 values in `type` (the CPU reference gets the same rounded inputs).
inline std::vector<float> rounded(std::vector<float> v, DType type) {
  for (float& x : v) {
    if (type == DType::kBF16) x = kmath::float_from_bf16(kmath::bf16_from_float(x));
    if (type == DType::kF16) x = kmath::float_from_f16(kmath::f16_from_float(x));
  }
  return v;
}

// Relative to the tensor's largest finite magnitude; non-finite values by equality (tests/support/close.h).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const test::CloseReport r = test::compare_close(got, want, rtol);
  EXPECT_EQ(r.bad, 0u) << what << ": " << r.bad << " of " << got.size() << " elements differ beyond " << rtol
                       << " x max finite |want| = " << r.tolerance << "; first at " << r.first << ": got "
                       << (got.empty() ? 0.0f : got[r.first]) << ", want " << (want.empty() ? 0.0f : want[r.first]);
}

// A tensor together with the memory behind it.
struct Held {
  Buffer buffer;
  Tensor t;
};

inline Held make(Backend& b, Shape s, DType type = DType::kF32) {
  Held h{b.allocate(static_cast<size_t>(s.numel()) * dtype_size(type)), {}};
  h.t = h.buffer.view(s, type);
  return h;
}

inline Held make_from(Backend& b, Shape s, const std::vector<float>& values, DType type = DType::kF32) {
  Held f32 = make(b, s);
  b.upload(values.data(), f32.t);
  if (type == DType::kF32) return f32;
  Held h = make(b, s, type);
  b.copy(f32.t, h.t);
  return h;
}

inline std::vector<float> fetch(Backend& b, Tensor t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    b.download(t, out.data());
    return out;
  }
  Held f32 = make(b, t.shape());
  b.copy(t, f32.t);
  b.download(f32.t, out.data());
  return out;
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found none, GPU test not run";
    CudaOptions o;
    o.tf32 = Tf32::kDeny;  // fp32 comparisons against oneDNN need full fp32 products
    o.determinism = Determinism::kRequired;
    gpu_ = make_cuda_backend(o);
    cpu_ = cpu::make_cpu_backend(2);
  }
  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<Backend> cpu_;
};

}  // namespace torus::worker::cuda

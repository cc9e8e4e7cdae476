// The CPU backend's hand-written ops (worker/backend/cpu/host_ops.cc): top-k with ties ranked by class index, the
// label-smoothed softmax cross-entropy and its gradient, the SGD update, and the inputs they refuse.
#include "worker/backend/cpu/host_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/math.h"

namespace torus::worker::cpu {
namespace {

TEST(HostOps, TopKRanksTiesByClassIndexAsArgmaxDoes) {
  // Row 0 is constant: a tie everywhere, so it predicts class 0, then 1, 2, 3. Row 1 ranks 1, 3, 2, 0.
  std::vector<float> z = {1, 1, 1, 1, 0.1f, 0.9f, 0.5f, 0.7f};
  struct Case {
    std::vector<int32_t> labels;
    int k;
    int64_t correct;
  };
  for (const Case& c : {Case{{0, 3}, 1, 1}, Case{{0, 3}, 2, 2}, Case{{2, 2}, 2, 0}, Case{{2, 2}, 3, 2}}) {
    std::vector<int32_t> y = c.labels;
    EXPECT_EQ(count_top_k(Tensor(z.data(), {2, 4}), Tensor(y.data(), {2}, DType::kI32), c.k), c.correct)
        << "labels " << y[0] << ", " << y[1] << ", top-" << c.k;
  }
}

TEST(HostOps, UniformLogitsCostLogKAndTheGradientIsSoftmaxMinusTheTarget) {
  constexpr int64_t kN = 2, kClasses = 5;
  std::vector<float> z(kN * kClasses, 0.3f), dz(kN * kClasses);
  std::vector<int32_t> y = {1, 4};
  for (float smoothing : {0.0f, 0.1f}) {
    const double loss = softmax_cross_entropy(Tensor(z.data(), {kN, kClasses}), Tensor(y.data(), {kN}, DType::kI32),
                                              smoothing, Tensor(dz.data(), {kN, kClasses}));
    EXPECT_NEAR(loss, std::log(5.0), 1e-6) << "every class at 1/5, whatever the targets";
    for (int64_t i = 0; i < kN; ++i) {
      double row = 0;
      for (int64_t j = 0; j < kClasses; ++j) {
        const float t = math::smoothed_target(static_cast<int>(j), y[static_cast<size_t>(i)], smoothing, kClasses);
        EXPECT_NEAR(dz[static_cast<size_t>(i * kClasses + j)], (0.2f - t) / kN, 1e-7);
        row += dz[static_cast<size_t>(i * kClasses + j)];
      }
      EXPECT_NEAR(row, 0.0, 1e-7) << "softmax gradients sum to zero";
    }
  }
}

TEST(HostOps, SgdUpdatesEveryElementWithTheSharedFormula) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, g = {0.2f, 0.1f, -0.3f}, v = {0.5f, 0.0f, 1.0f};
  std::vector<float> want_w = w, want_v = v;
  const SgdHyper h{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = math::Nesterov::kOn};
  for (size_t i = 0; i < w.size(); ++i)
    math::sgd_element(want_w[i], g[i], want_v[i], h.lr, h.momentum, h.weight_decay, h.nesterov);
  sgd_update(Tensor(w.data(), {3}), Tensor(g.data(), {3}), Tensor(v.data(), {3}), h);
  EXPECT_EQ(w, want_w);
  EXPECT_EQ(v, want_v);
}

TEST(HostOps, RefuseLabelsOutsideTheClassesAndMismatchedSizes) {
  std::vector<float> z(6), dz(6), w(3), g(2), v(3);
  std::vector<int32_t> y = {0, 3};
  try {
    softmax_cross_entropy(Tensor(z.data(), {2, 3}), Tensor(y.data(), {2}, DType::kI32), 0.0f, Tensor());
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("labels[1]: label 3 outside [0, 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(count_top_k(Tensor(z.data(), {2, 3}), Tensor(y.data(), {2}, DType::kI32), 1), InvalidArgument);
  EXPECT_THROW(sgd_update(Tensor(w.data(), {3}), Tensor(g.data(), {2}), Tensor(v.data(), {3}), SgdHyper{}),
               InvalidArgument);
}

TEST(HostOps, ExpectElementsNamesWhatHasTheWrongSize) {
  std::vector<float> x(6);
  EXPECT_NO_THROW(expect_elements(Tensor(x.data(), {2, 3}), 6, "conv input"));
  try {
    expect_elements(Tensor(x.data(), {2, 3}), 8, "conv input");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cpu backend: conv input has 6 elements, expected 8"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace torus::worker::cpu

// The synthetic data set: the same seed gives the same pixels, and its classes can be told apart.
#include "worker/data/synthetic.h"

#include <gtest/gtest.h>

#include <vector>

namespace torus::worker::data {
namespace {

// The synthetic set is learnable: nearest class-mean on held-out samples is far above chance.
TEST(Synthetic, IsDeterministicAndLearnable) {
  const SyntheticSpec spec{.n = 2000, .h = 16, .w = 16, .c = 3, .classes = 10, .seed = 4};
  auto a = make_synthetic(spec);
  EXPECT_EQ(a->pixels(), make_synthetic(spec)->pixels());
  EXPECT_NE(a->pixels(), make_synthetic({.n = 2000, .h = 16, .w = 16, .c = 3, .classes = 10, .seed = 5})->pixels());
  const size_t dim = 16 * 16 * 3;
  std::vector<double> centroid(10 * dim);
  std::vector<int> count(10);
  for (int i = 0; i < 1500; ++i) {
    const auto k = static_cast<size_t>(a->label(i));
    ++count[k];
    for (size_t d = 0; d < dim; ++d) centroid[k * dim + d] += a->pixels()[static_cast<size_t>(i) * dim + d];
  }
  for (size_t k = 0; k < 10; ++k) {
    ASSERT_GT(count[k], 50);
    for (size_t d = 0; d < dim; ++d) centroid[k * dim + d] /= count[k];
  }
  int correct = 0;
  for (int i = 1500; i < 2000; ++i) {
    double best = 1e300;
    size_t best_k = 0;
    for (size_t k = 0; k < 10; ++k) {
      double dist = 0;
      for (size_t d = 0; d < dim; ++d) {
        const double diff = a->pixels()[static_cast<size_t>(i) * dim + d] - centroid[k * dim + d];
        dist += diff * diff;
      }
      if (dist < best) best = dist, best_k = k;
    }
    correct += static_cast<int>(best_k) == a->label(i);
  }
  EXPECT_GT(correct, 400);  // 80%; chance is 10%
}

}  // namespace
}  // namespace torus::worker::data

// Shapes, tensor views and host buffers: element counts, reshapes and views that must fit, typed access, and the
// zeroed, cache-line-aligned host memory every CPU buffer comes from.
#include "worker/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "common/util/error.h"

namespace torus::worker {
namespace {

TEST(Shape, CountsElementsAndPrintsItself) {
  EXPECT_EQ((Shape{2, 3, 4, 5}).numel(), 120);
  EXPECT_EQ((Shape{7}).numel(), 7);
  EXPECT_EQ(Shape().numel(), 0) << "rank 0 holds nothing";
  EXPECT_EQ((Shape{4, 0}).numel(), 0);
  EXPECT_EQ((Shape{2, 3}).str(), "(2, 3)");
  EXPECT_EQ((Shape{2, 3}).rank(), 2);
  EXPECT_NE((Shape{2, 3}), (Shape{3, 2}));
}

TEST(Shape, RefusesMoreThanFourDimensionsAndNegativeOnes) {
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), InvalidArgument);
  EXPECT_THROW((Shape{2, -1}), InvalidArgument);
}

TEST(Tensor, ReshapeKeepsTheMemoryAndRefusesAnotherElementCount) {
  float data[12] = {};
  const Tensor t(data, {2, 1, 1, 6});
  const Tensor flat = t.reshaped({2, 6});
  EXPECT_EQ(flat.data(), t.data());
  EXPECT_EQ(flat.shape(), (Shape{2, 6}));
  EXPECT_EQ(flat.bytes(), 12 * sizeof(float));
  EXPECT_THROW(t.reshaped({5, 2}), InvalidArgument);
}

TEST(Tensor, TypedAccessChecksTheDType) {
  int32_t labels[4] = {};
  const Tensor y(labels, {4}, DType::kI32);
  EXPECT_EQ(y.i32(), labels);
  EXPECT_THROW(y.f32(), InvalidArgument);
  EXPECT_THROW(y.span(), InvalidArgument);
  float x[2] = {};
  EXPECT_THROW(Tensor(x, {2}).i32(), InvalidArgument);
}

TEST(Buffer, HostMemoryIsZeroedAlignedAndViewsMustFit) {
  const Buffer b = allocate_host(100);
  EXPECT_EQ(b.bytes(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  const auto* bytes = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < b.bytes(); ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  EXPECT_EQ(b.view({25}).numel(), 25);
  EXPECT_EQ(b.view({50}, DType::kBF16).dtype(), DType::kBF16);
  EXPECT_THROW(b.view({26}), InvalidArgument) << "104 bytes of fp32 in a 100-byte buffer";
}

TEST(Buffer, MovingHandsOverTheMemory) {
  Buffer a = allocate_host(64);
  void* p = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from buffer must own nothing
}

}  // namespace
}  // namespace torus::worker

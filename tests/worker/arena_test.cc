// The parameter arena: entries at aligned offsets in registration order, mirrors with the same layout in their own
// memory, contiguous spans of entries (a gradient bucket), and what it refuses.
#include "worker/tensor/arena.h"

#include <gtest/gtest.h>

#include <cstddef>

#include "common/util/error.h"

namespace torus::worker {
namespace {

Buffer host(size_t bytes) { return allocate_host(bytes); }

// conv (3 x 1 x 3 x 3 = 27 elements, 32 stored), bias (5), bn scale (16): offsets 0, 32, 48.
Arena three_entries() {
  Arena a;
  a.add("conv.weight", ParamKind::kConvWeight, {3, 1, 3, 3}, 32);
  a.add("conv.bias", ParamKind::kBias, {5}, 5);
  a.add("bn.weight", ParamKind::kNormScale, {16}, 16);
  return a;
}

TEST(Arena, EntriesStartAtAlignedOffsetsInRegistrationOrder) {
  const Arena a = three_entries();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a.entry(0).offset, 0u);
  EXPECT_EQ(a.entry(1).offset, 32u);
  EXPECT_EQ(a.entry(2).offset, 48u) << "5 stored elements still take a whole 16-element slot";
  EXPECT_EQ(a.total_elements(), 64u);
  for (const ArenaEntry& e : a.entries()) EXPECT_EQ(e.offset % Arena::kAlignElements, 0u) << e.name;
  EXPECT_EQ(a.entry(0).logical_shape, (Shape{3, 1, 3, 3}));
  EXPECT_EQ(a.entry(0).elements, 32u) << "the stored count, padding included";
  EXPECT_FALSE(a.allocated());
}

TEST(Arena, ViewsAndSpansPointIntoTheOneAllocation) {
  Arena a = three_entries();
  a.allocate(host);
  ASSERT_TRUE(a.allocated());
  const float* base = a.all().f32();
  EXPECT_EQ(a.all().numel(), 64);
  EXPECT_EQ(a.view(1).f32(), base + 32);
  EXPECT_EQ(a.view(1).numel(), 5);
  // Entries [1, 3): from the bias's offset to the end of the bn scale, the alignment gap included.
  const Tensor span = a.span_view(1, 3);
  EXPECT_EQ(span.f32(), base + 32);
  EXPECT_EQ(span.numel(), 48 + 16 - 32);
  EXPECT_EQ(a.span_view(0, 1).numel(), 32);
}

TEST(Arena, AMirrorHasTheSameLayoutInItsOwnMemory) {
  Arena a = three_entries();
  a.allocate(host);
  a.view(0).f32()[0] = 7.0f;
  const Arena m = a.mirror(host);
  ASSERT_EQ(m.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(m.entry(i).name, a.entry(i).name);
    EXPECT_EQ(m.entry(i).offset, a.entry(i).offset);
  }
  EXPECT_NE(m.all().data(), a.all().data());
  EXPECT_EQ(m.view(0).f32()[0], 0.0f) << "a mirror starts zeroed, it does not copy the values";
}

TEST(Arena, RefusesWhatWouldBreakItsLayout) {
  Arena a = three_entries();
  EXPECT_THROW(a.add("small", ParamKind::kBias, {8}, 4), InvalidArgument) << "fewer stored elements than the shape";
  a.allocate(host);
  EXPECT_THROW(a.add("late", ParamKind::kBias, {4}, 4), InvalidArgument) << "added after allocation";
  EXPECT_THROW(a.span_view(2, 2), InvalidArgument);
  EXPECT_THROW(a.span_view(1, 4), InvalidArgument);
}

TEST(ParamKind, OnlyConvAndLinearWeightsTakeWeightDecay) {
  for (ParamKind k : {ParamKind::kConvWeight, ParamKind::kLinearWeight}) EXPECT_TRUE(takes_weight_decay(k));
  for (ParamKind k : {ParamKind::kBias, ParamKind::kNormScale, ParamKind::kNormShift, ParamKind::kNormStat})
    EXPECT_FALSE(takes_weight_decay(k)) << param_kind_name(k);
  EXPECT_STREQ(param_kind_name(ParamKind::kNormStat), "norm_stat");
}

}  // namespace
}  // namespace torus::worker

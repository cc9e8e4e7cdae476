// worker/comm/types.h: chunking a buffer among ranks, and the reductions over many inputs.
#include "worker/comm/types.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace torus::comm {
namespace {

TEST(ChunkRange, CoversEveryCountExactlyOnce) {
  for (size_t count : {0u, 1u, 2u, 7u, 13u, 1000u, 1001u}) {
    for (int n : {1, 2, 3, 4, 7, 8}) {
      size_t next = 0;
      for (int r = 0; r < n; ++r) {
        Range c = chunk_range(count, n, r);
        EXPECT_EQ(c.begin, next) << count << " " << n << " " << r;
        EXPECT_LE(c.size(), count / n + 1);
        next = c.end;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Reduce, ManyInputsMatchPairwiseSums) {
  std::vector<std::vector<double>> in(5, std::vector<double>(5003));
  for (size_t j = 0; j < in.size(); ++j)
    for (size_t i = 0; i < in[j].size(); ++i) in[j][i] = static_cast<double>(i * (j + 1)) * 0.5;
  std::vector<const void*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<double> out(5003);
  reduce_many(DType::kF64, ReduceOp::kSum, out.data(), ptrs.data(), 5, out.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<double>(i) * 0.5 * 15) << i;
  std::vector<int32_t> a = {1, 5, -3}, b = {4, 2, -1}, m(3);
  reduce_into(DType::kI32, ReduceOp::kMax, m.data(), a.data(), b.data(), 3);
  EXPECT_EQ(m, (std::vector<int32_t>{4, 5, -1}));
}

}  // namespace
}  // namespace torus::comm

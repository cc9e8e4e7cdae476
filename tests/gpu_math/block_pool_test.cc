// The caching pool behind the CUDA backend's allocate(), with malloc as the upstream allocator.
#include "worker/backend/cuda/block_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "common/util/error.h"

namespace torus::worker::cuda {
namespace {

struct CountingUpstream {
  size_t live_bytes = 0, limit = SIZE_MAX;
  int allocs = 0, frees = 0;
  std::set<void*> live;
  BlockPool::Upstream make() {
    return {[this](size_t bytes) -> void* {
              if (live_bytes + bytes > limit) return nullptr;
              void* p = std::malloc(bytes);
              live.insert(p);
              live_bytes += bytes;
              ++allocs;
              sizes[p] = bytes;
              return p;
            },
            [this](void* p) {
              live_bytes -= sizes.at(p);
              live.erase(p);
              ++frees;
              std::free(p);
            }};
  }
  std::map<void*, size_t> sizes;
};

TEST(BlockPool, RoundsSmallTo512AndLargeTo2MiB) {
  EXPECT_EQ(BlockPool::rounded(1), 512u);
  EXPECT_EQ(BlockPool::rounded(512), 512u);
  EXPECT_EQ(BlockPool::rounded(513), 1024u);
  EXPECT_EQ(BlockPool::rounded(size_t{1} << 20), size_t{2} << 20);
  EXPECT_EQ(BlockPool::rounded((size_t{2} << 20) + 1), size_t{4} << 20);
}

TEST(BlockPool, ReleasedBlocksAreReusedWithoutUpstreamCalls) {
  CountingUpstream up;
  BlockPool pool(up.make());
  void* a = pool.allocate(1000);
  pool.release(a);
  void* b = pool.allocate(900);  // same 1024-byte class
  EXPECT_EQ(a, b);
  EXPECT_EQ(up.allocs, 1);
  EXPECT_EQ(pool.stats().reuses, 1u);
  void* c = pool.allocate(1000);  // a is in use: a new block
  EXPECT_NE(c, b);
  EXPECT_EQ(up.allocs, 2);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().cached_bytes, 2048u);
}

TEST(BlockPool, DoesNotHandOutAMuchLargerBlock) {
  CountingUpstream up;
  BlockPool pool(up.make());
  void* big = pool.allocate(size_t{64} << 20);
  pool.release(big);
  void* small = pool.allocate(size_t{4} << 20);
  EXPECT_NE(small, big);
  EXPECT_EQ(up.allocs, 2);
  pool.release(small);
}

TEST(BlockPool, OutOfMemoryTrimsTheCacheAndRetries) {
  CountingUpstream up;
  up.limit = size_t{8} << 20;
  BlockPool pool(up.make());
  void* a = pool.allocate(size_t{6} << 20);
  pool.release(a);                           // 6 MiB cached
  void* b = pool.allocate(size_t{3} << 20);  // does not fit next to the cache: trim, then allocate
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(up.frees, 1);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
  try {
    (void)pool.allocate(size_t{16} << 20);
    FAIL() << "expected an out-of-memory error";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate 16777216 bytes"), std::string::npos) << e.what();
  }
  pool.release(b);
}

TEST(BlockPool, UnknownPointersAreIgnoredAndTheDestructorReturnsTheCache) {
  CountingUpstream up;
  {
    BlockPool pool(up.make());
    int local = 0;
    pool.release(&local);
    pool.release(nullptr);
    pool.release(pool.allocate(100));
    pool.release(pool.allocate(size_t{3} << 20));
    EXPECT_EQ(pool.stats().upstream_allocs, 2u);
    EXPECT_GE(pool.stats().peak_bytes, (size_t{4} << 20) + 512);
  }
  EXPECT_TRUE(up.live.empty());
}

}  // namespace
}  // namespace torus::worker::cuda

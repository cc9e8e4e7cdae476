// The shared-memory level on its own, ranks as threads: all-reduce over window and slice boundaries (sizes that
// neither the window nor the rank count divides, 1 element, odd counts), with 2, 3 and 4 ranks, on both sides of
// the size from which results are written back with streaming stores; all-gather likewise.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tests/comm/comm_test_util.h"
#include "worker/comm/shm_communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using testing::run_ranks;

std::string job_name() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

// Exact in float (small integers) so every element can be compared for equality.
float contribution(int rank, size_t i) { return static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 29)); }

// Runs `n` ranks of one ShmCommunicator group with `slot_bytes` windows, each calling `body(shm, rank)`.
template <typename Body>
void run_group(int n, size_t slot_bytes, Body body) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = "k";
  auto base = std::make_shared<TcpStore>(o);
  run_ranks(n, [&](int rank) {
    ShmOptions opt;
    opt.slot_bytes = slot_bytes;
    ShmCommunicator shm(rank, n, std::make_shared<PrefixStore>(job_name() + std::to_string(n), base), opt);
    body(shm, rank);
  });
}

// Runs `n` ranks of one ShmCommunicator group with `slot_bytes` windows; each rank all-reduces every count in turn.
void all_reduce_counts(int n, size_t slot_bytes, const std::vector<size_t>& counts, ReduceOp op) {
  run_group(n, slot_bytes, [&](ShmCommunicator& shm, int rank) {
    for (size_t count : counts) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = contribution(rank, i);
      shm.all_reduce_now(view_of(std::span<float>(v)), op);
      for (size_t i = 0; i < count; ++i) {
        float want = contribution(0, i);
        for (int r = 1; r < n; ++r)
          want = op == ReduceOp::kSum ? want + contribution(r, i) : std::max(want, contribution(r, i));
        ASSERT_EQ(v[i], want) << n << " ranks, count " << count << ", rank " << rank << ", element " << i;
      }
    }
  });
}

constexpr size_t kWindowFloats = 4096 / sizeof(float);  // the smallest window: one page

TEST(ShmAllReduce, WindowAndSliceBoundariesWithTwoThreeAndFourRanks) {
  const std::vector<size_t> counts = {1,
                                      2,
                                      3,
                                      7,
                                      kWindowFloats - 1,
                                      kWindowFloats,
                                      kWindowFloats + 1,
                                      3 * kWindowFloats + 5,
                                      10007};
  for (int n : {2, 3, 4}) {
    all_reduce_counts(n, 4096, counts, ReduceOp::kSum);
    all_reduce_counts(n, 4096, counts, ReduceOp::kMax);
  }
}

TEST(ShmAllReduce, LargeBuffersWrittenBackWithStreamingStores) {
  // 16 MiB and above take the streaming copy-out; odd byte counts leave unaligned heads and tails in every slice.
  const std::vector<size_t> counts = {(16u << 20) / sizeof(float) + 1, (17u << 20) / sizeof(float) + 3};
  all_reduce_counts(2, 64u << 10, counts, ReduceOp::kSum);
  all_reduce_counts(3, 64u << 10, counts, ReduceOp::kSum);
}

TEST(ShmAllGather, SmallAndLargeBuffersWithOddCounts) {
  // Each rank fills only its own chunk; afterwards every chunk holds its owner's values on every rank. The large
  // counts take the streaming copy-out.
  const std::vector<size_t> counts = {1, 5, kWindowFloats + 3, (16u << 20) / sizeof(float) + 7};
  for (int n : {2, 3}) {
    run_group(n, 4096, [&](ShmCommunicator& shm, int rank) {
      for (size_t count : counts) {
        std::vector<float> v(count, -1.0f);
        const Range mine = chunk_range(count, n, rank);
        for (size_t i = mine.begin; i < mine.end; ++i) v[i] = contribution(rank, i);
        shm.all_gather_now(view_of(std::span<float>(v)));
        for (int owner = 0; owner < n; ++owner) {
          const Range c = chunk_range(count, n, owner);
          for (size_t i = c.begin; i < c.end; ++i)
            ASSERT_EQ(v[i], contribution(owner, i)) << n << " ranks, count " << count << ", element " << i;
        }
      }
    });
  }
}

}  // namespace
}  // namespace torus::comm

// The shared-memory level on its own, ranks as threads: all-reduce over window and slice boundaries (sizes that
// neither the window nor the rank count divides, 1 element, odd counts), with 2, 3 and 4 ranks, on both sides of
// the size from which results are written back with streaming stores, for every element type (the 16-bit ones are
// what compressed gradients travel as), with rings of 1 to 3 slots; all-reduce interleaved with the barrier
// collectives (they use other slots); all-gather likewise; a local peer that never joins is a Timeout naming it.
#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <memory>
#include <vector>

#include "worker/backend/half.h"

#include "common/util/error.h"
#include "tests/comm/comm_test_util.h"
#include "worker/comm/shm_communicator.h"
#include "worker/comm/store.h"

namespace torus::comm {
namespace {

using std::chrono::milliseconds;
using testing::run_ranks;
using testing::test_name;

// Exact in float (small integers) so every element can be compared for equality.
float contribution(int rank, size_t i) { return static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 29)); }

// Runs `n` ranks of one ShmCommunicator group with `slot_bytes` windows and `ring_slots` all-reduce slots per rank,
// each calling `body(shm, rank)`.
template <typename Body>
void run_group(int n, size_t slot_bytes, Body body, int ring_slots = ShmOptions{}.ring_slots) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = "k";
  auto base = std::make_shared<TcpStore>(o);
  run_ranks(n, [&](int rank) {
    ShmOptions opt;
    opt.slot_bytes = slot_bytes;
    opt.ring_slots = ring_slots;
    ShmCommunicator shm(rank, n, std::make_shared<PrefixStore>(test_name() + std::to_string(n), base), opt);
    body(shm, rank);
  });
}

// Runs `n` ranks of one ShmCommunicator group with `slot_bytes` windows; each rank all-reduces every count in turn.
void all_reduce_counts(int n, size_t slot_bytes, const std::vector<size_t>& counts, ReduceOp op,
                       int ring_slots = ShmOptions{}.ring_slots) {
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
  }, ring_slots);
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

TEST(ShmAllReduce, RingsOfOneToThreeSlots) {
  // One slot: a rank may not stage the next window before every peer gathered the last; more: it runs ahead.
  const std::vector<size_t> counts = {3, kWindowFloats + 1, 7 * kWindowFloats + 5, 10007};
  for (int ring : {1, 3})
    for (int n : {2, 4}) all_reduce_counts(n, 4096, counts, ReduceOp::kSum, ring);
}

// Element type T's stored form of the (small, integer) value v, and back: exact in every type up to 2048.
template <typename T>
T encode(float v) {
  return static_cast<T>(v);
}
float decode(double v) { return static_cast<float>(v); }
float decode(int32_t v) { return static_cast<float>(v); }
float decode(int64_t v) { return static_cast<float>(v); }

struct Half16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
template <>
Half16 encode<Half16>(float v) {
  return {worker::math::f16_from_float(v)};
}
template <>
BFloat16 encode<BFloat16>(float v) {
  return {worker::math::bf16_from_float(v)};
}
float decode(Half16 v) { return worker::math::float_from_f16(v.bits); }
float decode(BFloat16 v) { return worker::math::float_from_bf16(v.bits); }

// All-reduces (sum and max) of every count with n ranks in element type T (tagged `dtype`), compared exactly.
template <typename T>
void all_reduce_typed(DType dtype, int n, const std::vector<size_t>& counts) {
  run_group(n, 4096, [&](ShmCommunicator& shm, int rank) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      for (size_t count : counts) {
        std::vector<T> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = encode<T>(contribution(rank, i));
        shm.all_reduce_now(BufferView{v.data(), count, dtype}, op);
        for (size_t i = 0; i < count; ++i) {
          float want = contribution(0, i);
          for (int r = 1; r < n; ++r)
            want = op == ReduceOp::kSum ? want + contribution(r, i) : std::max(want, contribution(r, i));
          ASSERT_EQ(decode(v[i]), want) << dtype_name(dtype) << ", " << n << " ranks, count " << count << ", rank "
                                        << rank << ", element " << i;
        }
      }
    }
  });
}

TEST(ShmAllReduce, EveryElementTypeWithTwoAndFourRanks) {
  // Windows of one page hold 512 doubles or 2048 halves: these counts cross window and slice boundaries in each.
  const std::vector<size_t> counts = {1, 5, 2049, 3 * 1024 + 7, 10007};
  for (int n : {2, 4}) {
    all_reduce_typed<double>(DType::kF64, n, counts);
    all_reduce_typed<int32_t>(DType::kI32, n, counts);
    all_reduce_typed<int64_t>(DType::kI64, n, counts);
    all_reduce_typed<Half16>(DType::kF16, n, counts);
    all_reduce_typed<BFloat16>(DType::kBF16, n, counts);
  }
}

TEST(ShmAllReduce, InterleavedWithTheBarrierCollectives) {
  // All-reduce's ring and the barrier collectives' slots are separate: back-to-back calls of both kinds, several
  // windows each, never read each other's data.
  constexpr int n = 3;
  run_group(n, 4096, [&](ShmCommunicator& shm, int rank) {
    for (int round = 0; round < 20; ++round) {
      const size_t count = 5 * kWindowFloats + static_cast<size_t>(round);
      std::vector<float> sum(count);
      for (size_t i = 0; i < count; ++i) sum[i] = contribution(rank, i + static_cast<size_t>(round));
      shm.all_reduce_now(view_of(std::span<float>(sum)), ReduceOp::kSum);

      std::vector<float> bcast(count, static_cast<float>(rank));
      const int root = round % n;
      if (rank == root)
        for (size_t i = 0; i < count; ++i) bcast[i] = contribution(root, i) + 1000.0f;
      shm.broadcast_now(view_of(std::span<float>(bcast)), root);

      std::vector<float> gathered(count, -1.0f);
      const Range mine = chunk_range(count, n, rank);
      for (size_t i = mine.begin; i < mine.end; ++i) gathered[i] = contribution(rank, i) + 2000.0f;
      shm.all_gather_now(view_of(std::span<float>(gathered)));

      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += contribution(r, i + static_cast<size_t>(round));
        ASSERT_EQ(sum[i], want) << "round " << round << ", rank " << rank << ", element " << i;
        ASSERT_EQ(bcast[i], contribution(root, i) + 1000.0f) << "round " << round << ", element " << i;
      }
      for (int owner = 0; owner < n; ++owner) {
        const Range c = chunk_range(count, n, owner);
        for (size_t i = c.begin; i < c.end; ++i)
          ASSERT_EQ(gathered[i], contribution(owner, i) + 2000.0f) << "round " << round << ", element " << i;
      }
      shm.barrier_now();
    }
  });
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

TEST(SharedMemory, DeadLocalPeerBecomesATimeoutNamingIt) {
  TcpStoreServer server("127.0.0.1", 0, "k");
  TcpStoreOptions o;
  o.port = server.port();
  o.secret = "k";
  auto base = std::make_shared<TcpStore>(o);
  std::latch attached(2);
  run_ranks(2, [&](int rank) {
    ShmOptions opt;
    opt.timeout = milliseconds(300);
    ShmCommunicator shm(rank, 2, std::make_shared<PrefixStore>(test_name(), base), opt);
    attached.arrive_and_wait();
    if (rank == 1) return;  // never joins the collective
    std::vector<float> v(100, 1.0f);
    try {
      shm.all_reduce_now(view_of(std::span<float>(v)), ReduceOp::kSum);
      ADD_FAILURE() << "all-reduce with a missing peer returned";
    } catch (const Timeout& e) {
      EXPECT_NE(std::string(e.what()).find("local ranks 1 never arrived"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace torus::comm

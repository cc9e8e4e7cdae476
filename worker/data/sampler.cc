#include "worker/data/sampler.h"

#include <numeric>
#include <string>

#include "common/util/error.h"

namespace torus::worker::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (rejection on the short top range).
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t r = splitmix64(state);
  while (r >= limit) r = splitmix64(state);
  return r % bound;
}

void check_world(int rank, int world) {
  if (world < 1) throw InvalidArgument("sampler: world size must be >= 1, got " + std::to_string(world));
  if (rank < 0 || rank >= world) {
    throw InvalidArgument("sampler: rank must be in [0, " + std::to_string(world) + "), got " + std::to_string(rank));
  }
}

void check_count(int64_t n) {
  if (n < 0) throw InvalidArgument("sampler: sample count must be >= 0, got " + std::to_string(n));
}

}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t state = a;
  for (uint64_t v : {b, c, d}) {
    state = splitmix64(state) ^ v;
  }
  return splitmix64(state);
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  check_count(n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = mix_seed(seed, static_cast<uint64_t>(epoch), 0x5EED);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(state, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

int64_t samples_per_rank(int64_t n, int world, Tail tail) {
  check_count(n);
  check_world(0, world);
  return tail == Tail::kPad ? (n + world - 1) / world : n / world;
}

std::vector<int64_t> shard_train(int64_t n, const ShardSpec& spec) {
  check_world(spec.rank, spec.world);
  const int64_t per_rank = samples_per_rank(n, spec.world, spec.tail);
  const int64_t total = per_rank * spec.world;
  std::vector<int64_t> order;
  if (spec.shuffle == Shuffle::kOn) {
    order = epoch_permutation(n, spec.seed, spec.epoch);
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  // Position p of the padded order is order[p % n]: wrap-around padding, as DistributedSampler does.
  for (int64_t p = spec.rank; p < total; p += spec.world) {
    mine.push_back(order[static_cast<size_t>(p % n)]);
  }
  return mine;
}

std::vector<int64_t> shard_eval(int64_t n, int rank, int world) {
  check_count(n);
  check_world(rank, world);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(n / world + 1));
  for (int64_t p = rank; p < n; p += world) mine.push_back(p);
  return mine;
}

std::vector<BatchRange> split_batches(int64_t count, int batch_size, LastBatch last) {
  if (batch_size < 1) throw InvalidArgument("batch size must be >= 1, got " + std::to_string(batch_size));
  check_count(count);
  std::vector<BatchRange> batches;
  for (int64_t begin = 0; begin < count; begin += batch_size) {
    const int64_t end = std::min(count, begin + batch_size);
    if (end - begin < batch_size && last == LastBatch::kDrop) break;
    batches.push_back({begin, end});
  }
  return batches;
}

}  // namespace torus::worker::data

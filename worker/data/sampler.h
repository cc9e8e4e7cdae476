#pragma once
// Which samples a rank reads, in which order, batch by batch. Pure functions: same inputs, same outputs.
//
//   auto order = shard_train(n, {.seed = s, .epoch = e, .rank = r, .world = w});  // this rank's sample indices
//   auto batches = split_batches(order.size(), batch_size, LastBatch::kDrop);      // [begin, end) per batch
//   // resume at batch k: start from batches[k]; the order does not depend on k.
//
// Training sharding follows PyTorch's DistributedSampler: one permutation of [0, n) per (seed, epoch), padded by
// wrap-around to a multiple of the world size (Tail::kPad) or cut to one (Tail::kDrop), then rank r takes positions
// r, r + world, r + 2 * world, ... So every rank gets the same count and the ranks together cover each sample once
// per epoch (plus at most world - 1 repeats with Tail::kPad). Evaluation sharding never pads: summed counts are exact.
#include <cstdint>
#include <vector>

namespace torus::worker::data {

// What to do with the samples that do not fill a last round of `world` ranks.
enum class Tail { kPad, kDrop };
// Whether the training order is shuffled each epoch.
enum class Shuffle { kOn, kOff };
// What to do with a last, partial batch.
enum class LastBatch { kKeep, kDrop };

struct ShardSpec {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int rank = 0;
  int world = 1;
  Tail tail = Tail::kPad;
  Shuffle shuffle = Shuffle::kOn;
};

// A permutation of [0, n), the same for the same (seed, epoch) on every machine (own Fisher-Yates + splitmix64,
// since std::shuffle's algorithm is implementation-defined).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

// This rank's training samples for one epoch, in reading order. Throws InvalidArgument on a bad rank/world/n.
std::vector<int64_t> shard_train(int64_t n, const ShardSpec& spec);

// This rank's evaluation samples: positions rank, rank + world, ... of [0, n); no padding, no shuffling.
std::vector<int64_t> shard_eval(int64_t n, int rank, int world);

// Samples per rank for shard_train (ceil(n / world) with Tail::kPad, floor with Tail::kDrop).
int64_t samples_per_rank(int64_t n, int world, Tail tail);

struct BatchRange {
  int64_t begin = 0;  // position in the rank's order
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Cuts `count` samples into batches of `batch_size` (the last one shorter with LastBatch::kKeep).
std::vector<BatchRange> split_batches(int64_t count, int batch_size, LastBatch last);

// A 64-bit mix of the inputs (splitmix64 chain): seeds for per-sample augmentation that do not depend on threads.
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0);

}  // namespace torus::worker::data

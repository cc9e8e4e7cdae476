#pragma once
// The prefetching loader: decodes and augments batches on its own threads, ahead of the training loop.
//
//   Loader loader(dataset, {.mode = Mode::kTrain, .batch_size = 256, .seed = 1, .rank = r, .world = w,
//                           .transform = t, .threads = 2, .prefetch = 4});
//   loader.start_epoch(epoch, first_batch);        // first_batch > 0 resumes mid-epoch (checkpoint data position)
//   while (auto batch = loader.next()) {           // std::nullopt at the end of the epoch
//     use(batch->images /* (N, H, W, C) */, batch->labels /* (N) */);  // valid until the next next()/start_epoch
//   }
//   loader.set_image_size({192, 192}); loader.set_batch_size(128);   // progressive resizing, next epoch on
//
// Which samples and in which order comes from sampler.h (deterministic from (seed, epoch), sharded by rank); each
// sample's augmentation is seeded by (seed, epoch, sample index), so the output does not depend on thread timing:
// read_batch() produces the same bytes synchronously. Buffers are a fixed pool (prefetch + 1 batches) reused for
// the whole run. An exception on a loader thread is re-thrown by next(); the destructor stops and joins the
// threads, abandoning a half-made batch. next()/start_epoch/set_* are for one consumer thread.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "worker/data/dataset.h"
#include "worker/data/image.h"
#include "worker/data/sampler.h"

namespace torus::worker::data {

// Evaluation only: group batches by aspect ratio and give each batch its own aspect-preserving size (fast.ai).
enum class Rectangular { kOff, kOn };
// What a batch holds. kTransformed: fp32 images after the transform (crop, flip, resize, normalize). kRaw: the
// samples' u8 pixels as stored, untransformed (the backend augments them on the device); the output size must be
// the native size of every sample.
enum class Pixels { kTransformed, kRaw };

struct LoaderConfig {
  Mode mode = Mode::kTrain;
  int batch_size = 128;
  // Output size; {0, 0} means the data set's native size (sets whose images all have one size). With
  // Rectangular::kOn, `h` is the shorter side of each batch and the longer side follows the batch's aspect ratio.
  ImageSize image_size{0, 0};
  Transform transform;
  uint64_t seed = 0;
  int rank = 0;
  int world = 1;
  Tail tail = Tail::kPad;          // training sharding (evaluation never pads)
  Shuffle shuffle = Shuffle::kOn;  // training order
  LastBatch last_batch = LastBatch::kKeep;
  Rectangular rectangular = Rectangular::kOff;
  Pixels pixels = Pixels::kTransformed;
  int threads = 2;   // decode + augment threads
  int prefetch = 4;  // ready batches buffered ahead of the consumer
};

struct Batch {
  int n = 0;
  int h = 0;
  int w = 0;
  int c = 0;
  float* images = nullptr;    // (N, H, W, C), normalized; null with Pixels::kRaw
  const uint8_t* raw = nullptr;  // Pixels::kRaw: (N, H, W, C) u8 as stored; null otherwise
  int32_t* labels = nullptr;  // (N)
  int64_t index = 0;          // batch number within the epoch
};

// One epoch's reading plan for one rank: the order of sample indices and the batches cut from it.
struct PlannedBatch {
  int64_t begin = 0;  // positions in `order`
  int64_t end = 0;
  ImageSize size;  // output size of every image in the batch
};
struct EpochPlan {
  int64_t epoch = 0;
  std::vector<int64_t> order;
  std::vector<PlannedBatch> batches;
};

// Throws InvalidArgument naming the field when the configuration does not fit the data set.
void validate_config(const Dataset& dataset, const LoaderConfig& config);
EpochPlan plan_epoch(const Dataset& dataset, const LoaderConfig& config, int64_t epoch);

// The seed of one sample's augmentation.
uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t sample_index);

// Produces one sample (decode, crop, flip, resize, normalize) into dst (out.h, out.w, C).
void produce_sample(const Dataset& dataset, const Transform& t, Mode mode, int64_t index, ImageSize out,
                    uint64_t seed, float* dst);

// Synchronous: fills one planned batch; images must hold n * h * w * C floats, labels n values.
void read_batch(const Dataset& dataset, const LoaderConfig& config, const EpochPlan& plan, int64_t batch, float* images,
                int32_t* labels);

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderConfig config);
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader();

  // Takes effect at the next start_epoch (progressive resizing, batch-size schedules).
  void set_batch_size(int batch_size);
  void set_image_size(ImageSize size);

  // Abandons the current epoch (if any) and starts producing `epoch` from batch `first_batch`.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch in order, or std::nullopt after the epoch's last one. Re-throws a loader thread's exception.
  std::optional<Batch> next();

  int64_t batches_in_epoch() const;
  int64_t samples_in_epoch() const;
  // Total seconds next() spent blocked waiting for a batch (data-starvation metric).
  double wait_seconds() const;
  const Dataset& dataset() const { return *dataset_; }

 private:
  // What loader threads read for one epoch: immutable once published, so set_* never races with them.
  struct Epoch {
    EpochPlan plan;
    LoaderConfig config;
  };
  struct Slot {
    std::vector<float> images;
    std::vector<uint8_t> raw;
    std::vector<int32_t> labels;
    PlannedBatch batch;
    int64_t index = 0;
  };

  void worker_loop();
  bool can_claim() const;
  void produce(Slot& slot, const Epoch& epoch, int64_t batch, int64_t generation);
  void recycle_all_slots();

  std::shared_ptr<const Dataset> dataset_;
  LoaderConfig config_;
  std::vector<std::unique_ptr<Slot>> pool_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // loader threads: a batch can be claimed, or stop
  std::condition_variable ready_cv_;  // consumer and start_epoch: a batch is ready, an error, or threads idle
  std::shared_ptr<const Epoch> plan_;
  std::atomic<int64_t> generation_{0};  // bumped by start_epoch and the destructor; stale work is dropped
  int64_t next_claim_ = 0;
  int64_t next_deliver_ = 0;
  int in_flight_ = 0;
  bool stopping_ = false;
  std::vector<Slot*> free_;
  // Finished batches by number: a filled slot, or the exception that batch raised (delivered in order by next()).
  struct Finished {
    Slot* slot = nullptr;
    std::exception_ptr error;
  };
  std::map<int64_t, Finished> ready_;
  Slot* held_ = nullptr;
  bool failed_ = false;  // a batch raised: stop claiming more of this epoch
  double wait_seconds_ = 0;

  std::vector<std::thread> threads_;
};

}  // namespace torus::worker::data

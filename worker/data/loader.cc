#include "worker/data/loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "common/util/error.h"

namespace torus::worker::data {
namespace {

// Rectangular batches: sizes are multiples of this (friendly to convolution kernels, as in fast.ai).
constexpr int kRectMultiple = 8;

int round_to_multiple(double v, int m) { return std::max(m, static_cast<int>(std::lround(v / m)) * m); }

ImageSize output_size(const Dataset& dataset, const LoaderConfig& config) {
  if (config.image_size.h > 0 && config.image_size.w > 0) return config.image_size;
  return dataset.native_size(0);
}

double aspect(ImageSize s) { return static_cast<double>(s.w) / s.h; }

// fast.ai's rectangular validation: sort by aspect ratio, cut batches, give each batch the mean aspect ratio with
// the configured side as its shorter side; batch b goes to rank b % world, so ranks together read each sample once.
EpochPlan plan_rectangular(const Dataset& dataset, const LoaderConfig& config, EpochPlan plan) {
  const int64_t n = dataset.size();
  std::vector<std::pair<double, int64_t>> by_aspect;
  by_aspect.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) by_aspect.emplace_back(aspect(dataset.native_size(i)), i);
  std::stable_sort(by_aspect.begin(), by_aspect.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const int side = config.image_size.h;
  const auto global = split_batches(n, config.batch_size, LastBatch::kKeep);
  for (size_t b = static_cast<size_t>(config.rank); b < global.size(); b += static_cast<size_t>(config.world)) {
    double sum = 0;
    const int64_t begin = static_cast<int64_t>(plan.order.size());
    for (int64_t p = global[b].begin; p < global[b].end; ++p) {
      sum += by_aspect[static_cast<size_t>(p)].first;
      plan.order.push_back(by_aspect[static_cast<size_t>(p)].second);
    }
    const double ar = sum / static_cast<double>(global[b].size());
    const ImageSize size = ar < 1 ? ImageSize{round_to_multiple(side / ar, kRectMultiple), side}
                                  : ImageSize{side, round_to_multiple(side * ar, kRectMultiple)};
    plan.batches.push_back({begin, static_cast<int64_t>(plan.order.size()), size});
  }
  return plan;
}

}  // namespace

void validate_config(const Dataset& dataset, const LoaderConfig& config) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) throw InvalidArgument("loader." + message);
  };
  require(config.batch_size >= 1, "batch_size: must be >= 1, got " + std::to_string(config.batch_size));
  require(config.threads >= 1, "threads: must be >= 1, got " + std::to_string(config.threads));
  require(config.prefetch >= 1, "prefetch: must be >= 1, got " + std::to_string(config.prefetch));
  require(
      config.world >= 1 && config.rank >= 0 && config.rank < config.world,
      "rank: must be in [0, world), got rank " + std::to_string(config.rank) + " of " + std::to_string(config.world));
  require(
      config.image_size.h >= 0 && config.image_size.w >= 0 && (config.image_size.h > 0) == (config.image_size.w > 0),
      "image_size: expected both sides > 0, or {0, 0} for the native size; got " + std::to_string(config.image_size.h) +
          "x" + std::to_string(config.image_size.w));
  require(dataset.size() > 0, "dataset: " + dataset.describe() + " is empty");
  if (config.image_size.h == 0) {
    // Native size only works when every image has the same one; only in-memory sets promise that.
    require(dynamic_cast<const ArrayDataset*>(&dataset) != nullptr,
            "image_size: required for " + dataset.describe() + " (its images differ in size)");
  }
  require(config.rectangular == Rectangular::kOff || config.mode == Mode::kEval,
          "rectangular: only for evaluation (mode kEval)");
  require(config.rectangular == Rectangular::kOff || config.image_size.h > 0,
          "image_size: required with rectangular batches (its h is the shorter side)");
  if (config.pixels == Pixels::kRaw) {
    const auto* array = dynamic_cast<const ArrayDataset*>(&dataset);
    require(array != nullptr && config.rectangular == Rectangular::kOff &&
                (config.image_size.h == 0 || config.image_size == dataset.native_size(0)),
            "pixels: raw batches need an in-memory set read at its native size, got " + dataset.describe() + " at " +
                std::to_string(config.image_size.h) + "x" + std::to_string(config.image_size.w));
  }
  validate_transform(config.transform, dataset.channels());
}

EpochPlan plan_epoch(const Dataset& dataset, const LoaderConfig& config, int64_t epoch) {
  validate_config(dataset, config);
  EpochPlan plan;
  plan.epoch = epoch;
  if (config.rectangular == Rectangular::kOn) return plan_rectangular(dataset, config, std::move(plan));
  if (config.mode == Mode::kTrain) {
    plan.order = shard_train(dataset.size(), {.seed = config.seed,
                                              .epoch = epoch,
                                              .rank = config.rank,
                                              .world = config.world,
                                              .tail = config.tail,
                                              .shuffle = config.shuffle});
  } else {
    plan.order = shard_eval(dataset.size(), config.rank, config.world);
  }
  const ImageSize size = output_size(dataset, config);
  for (const BatchRange& r :
       split_batches(static_cast<int64_t>(plan.order.size()), config.batch_size, config.last_batch)) {
    plan.batches.push_back({r.begin, r.end, size});
  }
  return plan;
}

uint64_t sample_seed(uint64_t seed, int64_t epoch, int64_t sample_index) {
  return mix_seed(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample_index), 0xDA7A);
}

void produce_sample(const Dataset& dataset, const Transform& t, Mode mode, int64_t index, ImageSize out,
                    uint64_t seed, float* dst) {
  std::optional<Region> region;
  // Choose the crop from the header's size first, so the decoder may shrink while decoding.
  const DownscalePolicy policy = [&](ImageSize native) {
    region = choose_region(native, t, mode, out, seed);
    return std::max(1.0, std::min<double>(region->w / out.w, region->h / out.h));
  };
  const Image img = dataset.decode(index, policy);
  if (!region) region = choose_region(img.native, t, mode, out, seed);
  // Map the region from native to decoded coordinates.
  const float sx = static_cast<float>(img.w) / static_cast<float>(img.native.w);
  const float sy = static_cast<float>(img.h) / static_cast<float>(img.native.h);
  const Region mapped{region->x * sx, region->y * sy, region->w * sx, region->h * sy};
  resample_normalize(img, mapped, choose_flip(t, mode, seed), out, t.mean, t.std, dst);
}

namespace {

// Copies one planned batch's u8 pixels as stored (Pixels::kRaw; validate_config checked the sizes).
void copy_raw(const Dataset& dataset, const EpochPlan& plan, int64_t batch, uint8_t* raw, int32_t* labels) {
  const PlannedBatch& pb = plan.batches.at(static_cast<size_t>(batch));
  const size_t stride = static_cast<size_t>(pb.size.h) * pb.size.w * dataset.channels();
  for (int64_t p = pb.begin; p < pb.end; ++p) {
    const int64_t index = plan.order[static_cast<size_t>(p)];
    const Image img = dataset.decode(index, no_downscale);
    std::copy_n(img.data(), stride, raw + static_cast<size_t>(p - pb.begin) * stride);
    labels[p - pb.begin] = dataset.label(index);
  }
}

// Fills one planned batch; stops early (returns false) when `generation` moves away from `expected`.
bool fill_batch(const Dataset& dataset, const LoaderConfig& config, const EpochPlan& plan, int64_t batch, float* images,
                int32_t* labels, const std::atomic<int64_t>* generation, int64_t expected) {
  const PlannedBatch& pb = plan.batches.at(static_cast<size_t>(batch));
  const size_t stride = static_cast<size_t>(pb.size.h) * pb.size.w * dataset.channels();
  for (int64_t p = pb.begin; p < pb.end; ++p) {
    if (generation && generation->load(std::memory_order_relaxed) != expected) return false;
    const int64_t index = plan.order[static_cast<size_t>(p)];
    produce_sample(dataset, config.transform, config.mode, index, pb.size, sample_seed(config.seed, plan.epoch, index),
                   images + static_cast<size_t>(p - pb.begin) * stride);
    labels[p - pb.begin] = dataset.label(index);
  }
  return true;
}

}  // namespace

void read_batch(const Dataset& dataset, const LoaderConfig& config, const EpochPlan& plan, int64_t batch, float* images,
                int32_t* labels) {
  fill_batch(dataset, config, plan, batch, images, labels, nullptr, 0);
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderConfig config)
    : dataset_(std::move(dataset)), config_(std::move(config)) {
  if (!dataset_) throw InvalidArgument("loader.dataset: null");
  validate_config(*dataset_, config_);
  // One batch per prefetch place, plus the one the consumer holds.
  for (int i = 0; i < config_.prefetch + 1; ++i) {
    pool_.push_back(std::make_unique<Slot>());
    free_.push_back(pool_.back().get());
  }
  for (int i = 0; i < config_.threads; ++i) threads_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    ++generation_;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Loader::set_batch_size(int batch_size) {
  if (batch_size < 1) throw InvalidArgument("loader.batch_size: must be >= 1, got " + std::to_string(batch_size));
  std::lock_guard lock(mu_);
  config_.batch_size = batch_size;
}

void Loader::set_image_size(ImageSize size) {
  std::lock_guard lock(mu_);
  LoaderConfig candidate = config_;
  candidate.image_size = size;
  validate_config(*dataset_, candidate);
  config_ = std::move(candidate);
}

void Loader::start_epoch(int64_t epoch, int64_t first_batch) {
  LoaderConfig config;
  {
    std::lock_guard lock(mu_);
    config = config_;
  }
  auto plan = std::make_shared<const Epoch>(Epoch{plan_epoch(*dataset_, config, epoch), config});
  const auto batches = static_cast<int64_t>(plan->plan.batches.size());
  if (first_batch < 0 || first_batch > batches) {
    throw InvalidArgument("loader.start_epoch: first_batch must be in [0, " + std::to_string(batches) + "], got " +
                          std::to_string(first_batch));
  }
  std::unique_lock lock(mu_);
  ++generation_;  // loader threads drop what they are making for the old epoch
  ready_cv_.wait(lock, [this] { return in_flight_ == 0; });
  recycle_all_slots();
  failed_ = false;
  plan_ = std::move(plan);
  next_claim_ = first_batch;
  next_deliver_ = first_batch;
  lock.unlock();
  work_cv_.notify_all();
}

void Loader::recycle_all_slots() {
  for (auto& [index, finished] : ready_) {
    if (finished.slot) free_.push_back(finished.slot);
  }
  ready_.clear();
  if (held_) free_.push_back(held_);
  held_ = nullptr;
}

std::optional<Batch> Loader::next() {
  std::unique_lock lock(mu_);
  if (!plan_) throw InvalidArgument("loader.next: called before start_epoch");
  if (held_) {
    free_.push_back(held_);
    held_ = nullptr;
    work_cv_.notify_one();
  }
  if (next_deliver_ >= static_cast<int64_t>(plan_->plan.batches.size())) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  ready_cv_.wait(lock, [this] { return ready_.count(next_deliver_) > 0; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto it = ready_.find(next_deliver_);
  // The failed batch stays in place: every later next() of this epoch throws the same error.
  if (it->second.error) std::rethrow_exception(it->second.error);
  held_ = it->second.slot;
  ready_.erase(it);
  ++next_deliver_;
  return Batch{.n = static_cast<int>(held_->batch.end - held_->batch.begin),
               .h = held_->batch.size.h,
               .w = held_->batch.size.w,
               .c = dataset_->channels(),
               .images = held_->images.empty() ? nullptr : held_->images.data(),
               .raw = held_->raw.empty() ? nullptr : held_->raw.data(),
               .labels = held_->labels.data(),
               .index = held_->index};
}

int64_t Loader::batches_in_epoch() const {
  std::lock_guard lock(mu_);
  return plan_ ? static_cast<int64_t>(plan_->plan.batches.size()) : 0;
}

int64_t Loader::samples_in_epoch() const {
  std::lock_guard lock(mu_);
  return plan_ ? static_cast<int64_t>(plan_->plan.order.size()) : 0;
}

double Loader::wait_seconds() const {
  std::lock_guard lock(mu_);
  return wait_seconds_;
}

bool Loader::can_claim() const {
  return plan_ && !failed_ && !free_.empty() && next_claim_ < static_cast<int64_t>(plan_->plan.batches.size());
}

void Loader::worker_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || can_claim(); });
    if (stopping_) return;
    const int64_t batch = next_claim_++;
    Slot* slot = free_.back();
    free_.pop_back();
    const int64_t generation = generation_;
    std::shared_ptr<const Epoch> plan = plan_;
    ++in_flight_;
    lock.unlock();
    std::exception_ptr error;
    try {
      produce(*slot, *plan, batch, generation);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    --in_flight_;
    if (generation != generation_ || stopping_) {
      free_.push_back(slot);
    } else if (error) {
      free_.push_back(slot);
      failed_ = true;
      ready_.emplace(batch, Finished{nullptr, error});
    } else {
      ready_.emplace(batch, Finished{slot, nullptr});
    }
    ready_cv_.notify_all();
    work_cv_.notify_one();
  }
}

void Loader::produce(Slot& slot, const Epoch& epoch, int64_t batch, int64_t generation) {
  const PlannedBatch& pb = epoch.plan.batches[static_cast<size_t>(batch)];
  const size_t stride = static_cast<size_t>(pb.size.h) * pb.size.w * dataset_->channels();
  const auto n = static_cast<size_t>(pb.end - pb.begin);
  // resize() keeps the allocation when a batch fits: buffers are allocated only when shapes grow. A slot whose first
  // batch is an epoch's short last one still gets room for a whole batch, so the next full one does not reallocate.
  const size_t whole = std::max(n, static_cast<size_t>(epoch.config.batch_size));
  slot.labels.reserve(whole);
  slot.labels.resize(n);
  slot.batch = pb;
  slot.index = batch;
  if (epoch.config.pixels == Pixels::kRaw) {
    slot.raw.reserve(whole * stride);
    slot.raw.resize(n * stride);
    copy_raw(*dataset_, epoch.plan, batch, slot.raw.data(), slot.labels.data());
    return;
  }
  slot.images.reserve(whole * stride);
  slot.images.resize(n * stride);
  fill_batch(*dataset_, epoch.config, epoch.plan, batch, slot.images.data(), slot.labels.data(), &generation_,
             generation);
}

}  // namespace torus::worker::data

#include "worker/train/device_input.h"

#include <string>

#include "common/util/error.h"

namespace torus::worker::train {

DeviceInput::DeviceInput(Backend& backend, AugmentAt augment, DType activations, int64_t max_pixels, int64_t max_batch)
    : backend_(backend), augment_(augment), activations_(activations) {
  const size_t pixel_bytes = augment == AugmentAt::kDevice ? 1 : sizeof(float);
  staging_ = backend_.make_batch_staging(static_cast<size_t>(max_pixels) * pixel_bytes,
                                         static_cast<size_t>(max_batch) * sizeof(int32_t));
  if (!staging_) throw InvalidArgument(backend_.name() + " backend: no batch staging, though it offers it");
  images_ = backend_.allocate(static_cast<size_t>(max_pixels) * dtype_size(activations));
  labels_ = backend_.allocate(static_cast<size_t>(max_batch) * sizeof(int32_t));
}

DeviceInput::Staged DeviceInput::stage(const data::Batch& batch) {
  const size_t pixels = static_cast<size_t>(batch.n) * batch.h * batch.w * batch.c;
  const bool raw = augment_ == AugmentAt::kDevice;
  const void* images = raw ? static_cast<const void*>(batch.raw) : static_cast<const void*>(batch.images);
  if (images == nullptr)
    throw InvalidArgument(std::string("device input: the loader's batch has no ") + (raw ? "raw" : "fp32") + " pixels");
  const int slot = staging_->stage(images, pixels * (raw ? 1 : sizeof(float)), batch.labels,
                                   static_cast<size_t>(batch.n) * sizeof(int32_t));
  return {slot, batch.n, batch.h, batch.w, batch.c};
}

DeviceInput::Input DeviceInput::take(const Staged& s, const AugmentSpec& spec, uint64_t first_sample) {
  const Shape shape{s.n, s.h, s.w, s.c};
  const auto [images, labels] = staging_->acquire(s.slot);
  Input in{images_.view(shape, activations_), labels_.view({s.n}, DType::kI32)};
  if (augment_ == AugmentAt::kDevice) {
    backend_.augment(images, in.images, spec, first_sample);
  } else {
    backend_.copy(Tensor(images, shape, DType::kF32), in.images);  // converts to half activations
  }
  backend_.copy(Tensor(labels, {s.n}, DType::kI32), in.labels);
  staging_->release(s.slot);
  return in;
}

}  // namespace torus::worker::train

#pragma once
// Batches into device memory with staging (DevicePlan::staging == kPinned): the loader's batch is copied into a
// pinned slot and uploaded on the backend's copy stream while the previous step computes; take() then enqueues, on
// the compute stream, the augmentation (u8 pixels) or the conversion (fp32 pixels) into one fixed images buffer and
// the labels into one fixed labels buffer. Fixed: a captured step reads the same addresses on every replay. Buffers
// are sized once for the largest batch of any phase, so they never move.
#include <cstdint>
#include <memory>

#include "worker/backend/backend.h"
#include "worker/data/loader.h"
#include "worker/train/device_plan.h"

namespace torus::worker::train {

class DeviceInput {
 public:
  // `max_pixels`: the largest n * h * w * c of a training batch; `max_batch` its largest n.
  DeviceInput(Backend& backend, AugmentAt augment, DType activations, int64_t max_pixels, int64_t max_batch);

  struct Staged {
    int slot = -1;
    int n = 0, h = 0, w = 0, c = 0;
  };
  // Copies the batch (raw u8 when augmenting on the device, else fp32) into the next slot and starts its upload.
  Staged stage(const data::Batch& batch);

  struct Input {
    Tensor images;  // (N, H, W, C) in the activations' dtype
    Tensor labels;  // (N) int32
  };
  // Enqueues the staged batch's way into the fixed buffers and frees its slot. `spec` and `first_sample`: the device
  // augmentation's (sample i of the batch draws from (spec.seed, first_sample + i)); unused otherwise.
  Input take(const Staged& staged, const AugmentSpec& spec, uint64_t first_sample);

  AugmentAt augment() const { return augment_; }

 private:
  Backend& backend_;
  AugmentAt augment_;
  DType activations_;
  std::unique_ptr<BatchStaging> staging_;
  Buffer images_, labels_;
};

}  // namespace torus::worker::train

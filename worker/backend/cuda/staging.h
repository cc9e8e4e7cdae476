#pragma once
// Host -> device batch staging that overlaps with compute: pinned host slots, a low-priority copy stream, and
// events in both directions, so the training step never waits on the host and the copy of batch i+1 runs while
// batch i trains.
//
//   BatchStager stager(backend, image_bytes, label_bytes);   // 2 slots
//   int slot = stager.stage(host_images, host_labels);       // loader side: copy into pinned memory, enqueue H2D
//   auto [images, labels] = stager.acquire(slot);            // compute side: stream waits for the copy (no host wait)
//   ... step reads images/labels ...
//   stager.release(slot);                                    // compute side: the slot may be overwritten after this
//
// stage() waits on the host only for the slot's previous copy out of its pinned buffer (the loader thread's time,
// not the step's). Device slots stay at fixed addresses, which a captured CUDA Graph needs. A slot is reused after
// slots() - 1 others: release it before staging that many more batches (two slots: stage i+1, then release i).
#include <cstddef>
#include <utility>
#include <vector>

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/handles.h"

namespace torus::worker::cuda {

class BatchStager {
 public:
  BatchStager(CudaBackend& backend, size_t image_bytes, size_t label_bytes, int slots = 2);
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;
  ~BatchStager();

  // Copies the batch into the next slot's pinned buffer and enqueues its upload; returns the slot.
  int stage(const void* images, size_t image_bytes, const void* labels, size_t label_bytes);
  // Device addresses of the slot's images and labels, after ordering the compute stream behind its upload.
  std::pair<void*, void*> acquire(int slot);
  // Marks the compute stream's use of the slot as done (the next upload into it waits for this point).
  void release(int slot);
  int slots() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    PinnedMemory host;
    DeviceMemory device;
    Event uploaded, consumed;
  };
  Slot& at(int slot);

  CudaBackend& backend_;
  size_t image_bytes_, label_bytes_;
  size_t label_offset_;  // image_bytes_ rounded up, so the int32 labels are aligned
  Stream copy_stream_;
  std::vector<Slot> slots_;
  int next_ = 0;
};

}  // namespace torus::worker::cuda

#include "worker/backend/cuda/staging.h"

#include <cstring>
#include <string>

#include "common/util/error.h"

namespace torus::worker::cuda {

BatchStager::BatchStager(CudaBackend& backend, size_t image_bytes, size_t label_bytes, int slots)
    : backend_(backend),
      image_bytes_(image_bytes),
      label_bytes_(label_bytes),
      label_offset_(kmath::align_up(image_bytes, 256)),
      copy_stream_(make_stream(StreamPriority::kLow)) {
  if (slots < 2) throw InvalidArgument("batch stager: needs at least 2 slots to overlap, got " + std::to_string(slots));
  slots_.resize(static_cast<size_t>(slots));
  for (Slot& s : slots_) {
    s.host = PinnedMemory(label_offset_ + label_bytes);
    s.device = DeviceMemory(label_offset_ + label_bytes);
    s.uploaded = make_event();
    s.consumed = make_event();
    CUDA_CHECK(cudaEventRecord(s.consumed.get(), backend_.compute_stream()));  // free from the start
    CUDA_CHECK(cudaEventRecord(s.uploaded.get(), copy_stream_.get()));
  }
}

// The compute stream may still read a slot (and the copy stream write one): wait for both before freeing them.
BatchStager::~BatchStager() {
  for (Slot& s : slots_) (void)cudaEventSynchronize(s.consumed.get());
  (void)cudaStreamSynchronize(copy_stream_.get());
}

BatchStager::Slot& BatchStager::at(int slot) {
  if (slot < 0 || slot >= slots())
    throw InvalidArgument("batch stager: slot " + std::to_string(slot) + " outside [0, " + std::to_string(slots()) +
                          ")");
  return slots_[static_cast<size_t>(slot)];
}

int BatchStager::stage(const void* images, size_t image_bytes, const void* labels, size_t label_bytes) {
  if (image_bytes > image_bytes_ || label_bytes > label_bytes_)
    throw InvalidArgument("batch stager: batch of " + std::to_string(image_bytes) + " + " +
                          std::to_string(label_bytes) + " bytes exceeds the slots' " + std::to_string(image_bytes_) +
                          " + " + std::to_string(label_bytes_));
  const int slot = next_;
  next_ = (next_ + 1) % slots();
  Slot& s = slots_[static_cast<size_t>(slot)];
  CUDA_CHECK(cudaEventSynchronize(s.uploaded.get()));  // the pinned buffer's previous upload has been read
  auto* host = static_cast<char*>(s.host.get());
  std::memcpy(host, images, image_bytes);
  std::memcpy(host + label_offset_, labels, label_bytes);
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), s.consumed.get(), 0));  // the device slot is no longer read
  CUDA_CHECK(cudaMemcpyAsync(s.device.get(), host, image_bytes, cudaMemcpyHostToDevice, copy_stream_.get()));
  CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(s.device.get()) + label_offset_, host + label_offset_, label_bytes,
                             cudaMemcpyHostToDevice, copy_stream_.get()));
  CUDA_CHECK(cudaEventRecord(s.uploaded.get(), copy_stream_.get()));
  return slot;
}

std::pair<void*, void*> BatchStager::acquire(int slot) {
  Slot& s = at(slot);
  backend_.wait_event(s.uploaded.get());
  return {s.device.get(), static_cast<char*>(s.device.get()) + label_offset_};
}

void BatchStager::release(int slot) { backend_.record_event(at(slot).consumed.get()); }

}  // namespace torus::worker::cuda

// The Backend offers a GPU training loop takes (backend.h): pinned batch staging and captured steps, as the
// interface's types over BatchStager (staging.h) and StepGraph (graph.h).
#include <memory>

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/graph.h"
#include "worker/backend/cuda/staging.h"

namespace torus::worker::cuda {
namespace {

class Staging final : public BatchStaging {
 public:
  Staging(CudaBackend& backend, size_t image_bytes, size_t label_bytes) : stager_(backend, image_bytes, label_bytes) {}
  int stage(const void* images, size_t image_bytes, const void* labels, size_t label_bytes) override {
    return stager_.stage(images, image_bytes, labels, label_bytes);
  }
  std::pair<void*, void*> acquire(int slot) override { return stager_.acquire(slot); }
  void release(int slot) override { stager_.release(slot); }
  int slots() const override { return stager_.slots(); }

 private:
  BatchStager stager_;
};

class Captured final : public CapturedStep {
 public:
  Captured(CudaBackend& backend, StepGraph graph) : backend_(backend), graph_(std::move(graph)) {}
  void replay() override { graph_.replay(backend_.compute_stream()); }

 private:
  CudaBackend& backend_;
  StepGraph graph_;
};

}  // namespace

std::unique_ptr<BatchStaging> CudaBackend::make_batch_staging(size_t image_bytes, size_t label_bytes) {
  return std::make_unique<Staging>(*this, image_bytes, label_bytes);
}

std::unique_ptr<CapturedStep> CudaBackend::capture_step(const std::function<void()>& step) {
  return std::make_unique<Captured>(*this, StepGraph::capture(*this, step));
}

}  // namespace torus::worker::cuda

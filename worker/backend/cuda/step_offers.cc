// The Backend offers a GPU training loop takes (backend.h): pinned batch staging and captured steps, as the
// interface's types over BatchStager (staging.h) and StepGraph (graph.h).
#include <memory>
#include <optional>
#include <utility>

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
  Captured(CudaBackend& backend, StepGraph graph, bool checks_labels)
      : backend_(backend), graph_(std::move(graph)), checks_labels_(checks_labels) {}
  void replay() override {
    graph_.replay(backend_.compute_stream());
    if (checks_labels_) backend_.expect_label_check();
  }

 private:
  CudaBackend& backend_;
  StepGraph graph_;
  bool checks_labels_;  // the step has an async loss: its labels are checked at the next synchronize()
};

}  // namespace

std::unique_ptr<BatchStaging> CudaBackend::make_batch_staging(size_t image_bytes, size_t label_bytes) {
  return std::make_unique<Staging>(*this, image_bytes, label_bytes);
}

std::unique_ptr<CapturedStep> CudaBackend::capture_step(const std::function<void()>& step) {
  // The host code of a captured step runs once, at capture, and nothing on the device: whether the step checks
  // labels is known now, and each replay (not the capture) leaves a check for the next synchronize().
  const bool pending = labels_pending_;
  labels_pending_ = false;
  std::optional<StepGraph> graph;
  try {
    graph.emplace(StepGraph::capture(*this, step));
  } catch (...) {
    labels_pending_ = pending;
    throw;
  }
  const bool checks_labels = labels_pending_;
  labels_pending_ = pending;
  return std::make_unique<Captured>(*this, std::move(*graph), checks_labels);
}

}  // namespace torus::worker::cuda

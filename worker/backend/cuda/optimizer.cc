// The optimizer on the device: SGD per tensor and fused over a whole arena (one launch per step).
#include <algorithm>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "worker/backend/cuda/backend_internal.h"
#include "worker/backend/cuda/cuda_backend.h"

namespace torus::worker::cuda {

void CudaBackend::sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h) {
  expect_elements(grad, param.numel(), "gradient");
  expect_elements(momentum_buffer, param.numel(), "momentum buffer");
  if (!h.lr_value.empty()) expect_elements(h.lr_value, 1, "learning rate value");
  launch_sgd(param.f32(), grad.f32(), momentum_buffer.f32(), param.numel(), h.lr,
             h.lr_value.empty() ? nullptr : h.lr_value.f32(), h.momentum, h.weight_decay, h.nesterov, skip_flag(),
             stream_.get());
  ++params_version_;
}

void CudaBackend::sgd_update_segments(Tensor params, Tensor grads, Tensor momentum,
                                      std::span<const SgdSegment> segments, const SgdHyper& h) {
  expect_elements(grads, params.numel(), "gradient arena");
  expect_elements(momentum, params.numel(), "momentum arena");
  for (const SgdSegment& s : segments) {
    if (s.offset < 0 || s.elements < 0 || s.offset + s.elements > params.numel())
      throw InvalidArgument("sgd: segment [" + std::to_string(s.offset) + ", +" + std::to_string(s.elements) +
                            ") outside the arena of " + std::to_string(params.numel()) + " elements");
  }
  if (!h.lr_value.empty()) expect_elements(h.lr_value, 1, "learning rate value");
  std::vector<kmath::SgdChunk> chunks = kmath::sgd_chunks(segments, kmath::kSgdChunkElements);
  const bool same =
      chunks.size() == sgd_chunks_host_.size() &&
      std::equal(chunks.begin(), chunks.end(), sgd_chunks_host_.begin(), [](const auto& a, const auto& b) {
        return a.offset == b.offset && a.elements == b.elements && a.weight_decay == b.weight_decay;
      });
  if (!same) {
    // Once per arena layout (the first step, eager): the table stays on the device for every later step and replay.
    expect_not_capturing("uploading a new SGD chunk table");
    graph_pins_.replace(sgd_chunks_, allocate(std::max<size_t>(chunks.size(), 1) * sizeof(kmath::SgdChunk)));
    sgd_chunks_host_ = std::move(chunks);
    CUDA_CHECK(cudaMemcpyAsync(sgd_chunks_.data(), sgd_chunks_host_.data(),
                               sgd_chunks_host_.size() * sizeof(kmath::SgdChunk), cudaMemcpyHostToDevice,
                               stream_.get()));
  }
  launch_sgd_chunks(static_cast<const kmath::SgdChunk*>(sgd_chunks_.data()),
                    static_cast<int64_t>(sgd_chunks_host_.size()), params.f32(), grads.f32(), momentum.f32(), h.lr,
                    h.lr_value.empty() ? nullptr : h.lr_value.f32(), h.momentum, h.nesterov, skip_flag(),
                    stream_.get());
  ++params_version_;
}

}  // namespace torus::worker::cuda

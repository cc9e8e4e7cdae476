#pragma once
// CUDA Graph capture of a steady-state training step: after one warm-up step (so every plan, scratch buffer and
// workspace exists), everything the step enqueues on the compute stream is recorded once and replayed with a
// single launch. A captured step must not synchronize with the host or allocate: use
// softmax_cross_entropy_async() and the device-side loss scaler; keep input batches at fixed device addresses
// (staging.h's slots) and change hyper-parameters through device memory, not kernel arguments (the learning rate
// passed to sgd_update at capture time is the one every replay uses). A workspace or scratch buffer that grows
// after the capture (a larger shape run eagerly) is kept for the graph rather than freed (pin_for_graph). Events the
// step records or waits for through the backend (record_event, wait_event: staging.h) become graph nodes.
// A StepGraph must not outlive its backend.
#include <functional>

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/handles.h"

namespace torus::worker::cuda {

class StepGraph {
 public:
  // Runs `step` under stream capture and instantiates the result; rethrows what `step` throws (after ending
  // the capture, so the stream is usable again).
  static StepGraph capture(CudaBackend& backend, const std::function<void()>& step) {
    cudaStream_t s = backend.compute_stream();
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      step();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(s, &partial);
      if (partial != nullptr) (void)cudaGraphDestroy(partial);
      (void)cudaGetLastError();  // the invalidated capture's error must not surface at the next kernel launch
      throw;
    }
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    backend.pin_for_graph();  // the buffers the graph uses outlive their growth
    StepGraph out;
    out.graph_ = Graph(g);
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    out.exec_ = GraphExec(exec);
    return out;
  }

  void replay(cudaStream_t stream) const { CUDA_CHECK(cudaGraphLaunch(exec_.get(), stream)); }

 private:
  Graph graph_;
  GraphExec exec_;
};

}  // namespace torus::worker::cuda

#pragma once
// The CUDA backend: the Backend interface on one GPU with cuDNN (convolutions, batch norm, pooling), cuBLAS
// (linear layers) and Torus's own kernels (kernels.h), all enqueued on one compute stream.
//
// Layouts and precision. Activations are NHWC (channels-last) throughout; conv weights live in cuDNN's NHWC
// filter layout (O, KH, KW, I). An op's activation tensors (x, y, dx, dy) share one dtype: fp32, bf16 or fp16.
// Parameters, gradients, momentum and BN statistics are always fp32 ("master weights"): a bf16/fp16 conv reads
// a converted shadow of its fp32 weight, refreshed after every write to parameters (sgd_update, upload, copy,
// fill, import), and writes its weight gradient in fp32. Linear layers compute in fp32 (TF32 allowed) and
// convert half inputs/outputs at their edges; logits and the loss are fp32.
//
// Ordering. Every op is asynchronous on compute_stream(); only download(), synchronize(), the loss returned by
// softmax_cross_entropy() and count_top_k() wait for the device. A training step that needs no host value uses
// softmax_cross_entropy_async() and, for fp16, the device-side loss scaler (no host synchronization in the step,
// so the step can also be captured into a CUDA Graph: graph.h).
#include <cuda_runtime.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/backend/cuda/block_pool.h"
#include "worker/backend/cuda/graph_pins.h"
#include "worker/backend/cuda/handles.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/backend/cuda/plan_choices.h"

namespace torus::worker::cuda {

// How a conv algorithm is chosen per geometry: cuDNN's heuristics, or timing every candidate on first use
// (PyTorch's cudnn.benchmark).
enum class ConvSearch : uint8_t { kHeuristic, kBenchmark };
// TF32 tensor cores for fp32 convs and GEMMs (Ampere+): ~8x the fp32 rate, 10-bit mantissa products.
enum class Tf32 : uint8_t { kAllow, kDeny };
// Determinism and BnFusion: plan_choices.h.

struct CudaOptions {
  int device = 0;
  ConvSearch conv_search = ConvSearch::kHeuristic;
  Determinism determinism = Determinism::kAny;
  Tf32 tf32 = Tf32::kAllow;
  BnFusion bn_fusion = BnFusion::kCudnn;
  size_t workspace_limit = size_t{512} << 20;  // bytes one conv algorithm may use
};

// The device this rank uses: LOCAL_RANK (one GPU per rank), made current on the calling thread. Throws
// InvalidArgument naming the request and what is visible when the job asks for GPUs (`gpus_per_worker` ranks with
// spec.gang.device = gpu) and this process sees none, fewer than `gpus_per_worker`, or none at `local_rank`.
int select_device(int local_rank, int gpus_per_worker);
// This rank's options: device = select_device(local_rank, gpus_per_worker); tunables from the environment (declared
// in common/util/tunables.cc, listed in docs/tunables.md): TORUS_CUDA_TF32 (1: allow, 0: deny), TORUS_CUDNN_BENCHMARK
// (1: time conv algorithms), TORUS_CUDNN_DETERMINISTIC (1: deterministic conv algorithms and max pooling only),
// TORUS_CUDNN_BN_FUSION (0: off), TORUS_CUDNN_WORKSPACE_MB (per-algorithm workspace limit).
CudaOptions cuda_options_for_rank(int local_rank, int gpus_per_worker);
// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB" for logs and bench lines.
std::string device_description(int device);

// The caching pool behind allocate() on `device` (one per device, shared by the process's backends on it: all their
// work must be on one stream, or ordered with events, for stream-ordered reuse to hold).
BlockPool& device_pool(int device);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda-cudnn"; }
  int threads() const override { return 1; }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }

  Buffer allocate(size_t bytes) override;
  void upload(const void* host, Tensor dst) override;
  void download(Tensor src, void* host) override;
  void copy(Tensor src, Tensor dst) override;  // converts when the dtypes differ
  void fill(Tensor t, float value) override;
  void synchronize() override;

  size_t conv_weight_elements(const ConvGeometry& g) override;
  void conv_weight_import(const ConvGeometry& g, const float* host_oihw, Tensor native) override;
  void conv_weight_export(const ConvGeometry& g, Tensor native, float* host_oihw) override;
  void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) override;
  void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) override;
  void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) override;

  size_t norm_workspace_bytes(const NormGeometry& g) override;
  void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y, Tensor save_mean,
                             Tensor save_var, Tensor running_mean, Tensor running_var, float momentum,
                             Tensor workspace) override;
  void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean, Tensor var,
                              Tensor y) override;
  void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                     Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) override;
  // A block's BN + add + ReLU on our kernels, every dtype (norm_pool.cc).
  bool has_norm_add_relu(const NormGeometry& /*g*/) override { return true; }
  void norm_add_relu_forward_training(const NormGeometry& g, Tensor x, Tensor residual, Tensor gamma, Tensor beta,
                                      Tensor y, Tensor save_mean, Tensor save_var, Tensor running_mean,
                                      Tensor running_var, float momentum, Tensor workspace) override;
  void norm_add_relu_backward(const NormGeometry& g, Tensor x, Tensor y, Tensor dy, Tensor gamma, Tensor beta,
                              Tensor save_mean, Tensor save_var, Tensor workspace, Tensor dx, Tensor dresidual,
                              Tensor dgamma, Tensor dbeta) override;

  void relu_forward(Tensor x, Tensor y) override;
  void relu_backward(Tensor y, Tensor dy, Tensor dx) override;
  void add(Tensor a, Tensor b, Tensor y, Activation act) override;

  size_t pool_workspace_bytes(const PoolGeometry& g) override;
  void pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor workspace) override;
  void pool_backward(const PoolGeometry& g, Tensor dy, Tensor workspace, Tensor dx) override;

  void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) override;
  void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) override;
  void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) override;

  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) override;
  int64_t count_top_k(Tensor logits, Tensor labels, int k) override;

  void sgd_update(Tensor param, Tensor grad, Tensor momentum_buffer, const SgdHyper& h) override;
  void sgd_update_segments(Tensor params, Tensor grads, Tensor momentum, std::span<const SgdSegment> segments,
                           const SgdHyper& h) override;  // one launch (optimizer.cc)

  // --- beyond the interface: what a GPU training loop uses -------------------------------------------------
  cudaStream_t compute_stream() const { return stream_.get(); }
  int device() const { return options_.device; }
  const CudaOptions& options() const { return options_; }
  // Orders the compute stream after `event` (recorded on another stream: copies, NCCL) without a host wait.
  // Inside a graph capture both use the external flags: the graph records and waits for the event on every replay.
  void wait_event(cudaEvent_t event);
  void record_event(cudaEvent_t event);
  // A graph was captured on the compute stream (StepGraph::capture calls it): the workspace, scratch, shadow and
  // loss buffers it may use are kept alive when they grow later, until this backend is destroyed (graph_pins.h).
  void pin_for_graph();
  size_t graph_retained_bytes() const { return graph_pins_.retained_bytes(); }
  // A replayed step ran softmax_cross_entropy_async: the next synchronize() checks its labels.
  void expect_label_check() { labels_pending_ = true; }

  // The loss stays on the device: loss (1) fp32 receives the mean. Labels are checked at the next synchronize(),
  // which reports the first bad sample of any async step since the last check (a replayed one too).
  void softmax_cross_entropy_async(Tensor logits, Tensor labels, float smoothing, Tensor dlogits, Tensor loss) override;

  // Dynamic loss scaling (fp16). Once enabled, softmax_cross_entropy* scale dlogits by the current scale;
  // unscale_gradients() divides the gradients back and flags inf/NaN; sgd_update() skips the step when flagged;
  // update_loss_scale() advances the state machine (kernel_math.h) on the device.
  bool supports_activations(DType dtype) const override {
    return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
  }
  void enable_loss_scaling(const kmath::LossScaleConfig& config) override;
  void unscale_gradients(Tensor grads) override;
  void update_loss_scale() override;
  kmath::LossScaleState loss_scale_state() override;                       // waits for the device
  void set_loss_scale_state(const kmath::LossScaleState& state) override;  // waits for the device

  // Augments u8 images (device memory, (N, H, W, C) like `out`) into out's dtype: random translation, flip,
  // per-channel normalization (kernel_math.h). The tensor types have no u8, hence the raw pointer.
  TrainingOffers training_offers() const override { return {.staging = true, .augment = true, .capture = true}; }
  void augment(const void* images_u8, Tensor out, const AugmentSpec& spec, uint64_t first_sample) override;
  // What the training loop uses on a GPU (step_offers.cc): a BatchStager (staging.h) and a StepGraph (graph.h).
  std::unique_ptr<BatchStaging> make_batch_staging(size_t image_bytes, size_t label_bytes) override;
  std::unique_ptr<CapturedStep> capture_step(const std::function<void()>& step) override;

  // Conv weights in half precision are shadows of the fp32 masters: call after writing parameters behind the
  // backend's back (e.g. an all-reduce into the parameter arena).
  void invalidate_weight_shadows() override { ++params_version_; }
  BlockPoolStats memory_stats() const { return device_pool(options_.device).stats(); }
  // The start-up cost of choosing convolution algorithms (ConvSearch: cuDNN's heuristics or timed runs): the
  // (geometry, dtype) pairs planned so far and the host seconds their choice took.
  struct ConvSearchStats {
    int64_t shapes = 0;
    double seconds = 0;
  };
  ConvSearchStats conv_search_stats() const { return conv_search_; }

 private:
  struct ConvPlan;
  struct NormPlan;
  struct PoolPlan;
  struct Stash {  // what a backward needs that the interface does not pass, keyed by the layer's workspace
    const void* x = nullptr;
    const void* y = nullptr;
    BnFusion norm = BnFusion::kOff;  // batch norm + ReLU: how the training forward ran
  };
  struct Shadow {
    Buffer buffer;
    DType type = DType::kF32;
    uint64_t version = 0;  // params_version_ at the last conversion; 0: never converted
  };

  ConvPlan& conv_plan(const ConvGeometry& g, DType type);
  NormPlan& norm_plan(const NormGeometry& g, DType type);
  PoolPlan& pool_plan(const PoolGeometry& g, DType type);
  void choose_conv_algorithms(ConvPlan& p, const ConvGeometry& g, DType type);
  void* workspace(size_t bytes);
  void* scratch(int slot, size_t bytes);
  Tensor weights_as(Tensor w, DType type);
  Tensor as_f32(Tensor t, int slot);
  void check_labels_pending();
  // Batch norm's backward through the ReLU when the forward wrote no mask or the fused backward is not used.
  void norm_backward_unfused(const NormGeometry& g, NormBackward path, const Stash& forward, Tensor x, Tensor dy,
                             Tensor gamma, Tensor save_mean, const float* invstd, Tensor workspace_t, Tensor dx,
                             Tensor dgamma, Tensor dbeta);
  // Checks of the batch norm ops' tensors: x, y (and dy, dx, residual...) of the geometry's shape in x's dtype, the
  // per-channel ones fp32 of c values; the ReLU mask's workspace large enough.
  void expect_norm_tensors(const NormGeometry& g, Tensor x, std::initializer_list<Tensor> activations,
                           std::initializer_list<Tensor> per_channel) const;
  void expect_mask_workspace(const NormGeometry& g, Tensor workspace) const;
  // 1 / sqrt(var + eps) of the saved variance, in scratch, for the backward kernels.
  const float* invstd_of(const NormGeometry& g, Tensor save_var);
  // Throws a clear error instead of a failed capture when a step allocates or plans while being captured.
  void expect_not_capturing(const char* what) const;
  bool capturing() const;
  LossScalars* scalars();
  const float* loss_scale_ptr() const;
  const int32_t* skip_flag() const;

  CudaOptions options_;
  Stream stream_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  std::map<std::pair<ConvGeometry, DType>, std::unique_ptr<ConvPlan>> conv_plans_;
  ConvSearchStats conv_search_;
  std::map<std::pair<NormGeometry, DType>, std::unique_ptr<NormPlan>> norm_plans_;
  std::map<std::pair<PoolGeometry, DType>, std::unique_ptr<PoolPlan>> pool_plans_;
  std::unordered_map<const void*, Stash> stash_;
  std::unordered_map<const void*, Shadow> shadows_;
  uint64_t params_version_ = 1;
  Buffer workspace_;
  std::map<int, Buffer> scratch_;
  Buffer scalars_;  // LossScalars on the device
  PinnedMemory host_scalars_;
  Buffer row_loss_;
  Buffer cublas_workspace_;
  Buffer ones_;        // for bias gradients (a GEMV against ones)
  Buffer loss_scale_;  // kmath::LossScaleState on the device, when enabled
  Buffer sgd_chunks_;  // the fused update's chunk table (kmath::SgdChunk), uploaded when the arena layout changes
  std::vector<kmath::SgdChunk> sgd_chunks_host_;  // its host copy: what is on the device
  std::optional<kmath::LossScaleConfig> loss_scale_config_;
  GraphPins graph_pins_;  // retained blocks go back to the pool with the backend (its destructor synchronized)
  bool labels_pending_ = false;
};

std::unique_ptr<CudaBackend> make_cuda_backend(const CudaOptions& options = {});

}  // namespace torus::worker::cuda

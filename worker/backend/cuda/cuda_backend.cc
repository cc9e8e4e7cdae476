#include "worker/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "common/log/log.h"
#include "common/util/error.h"
#include "worker/backend/cuda/backend_internal.h"

namespace torus::worker::cuda {
namespace {

// The math type a conv descriptor must carry to run a candidate: the candidate's own (cuDNN may rank an algorithm
// whose math type differs from the descriptor's, and workspace sizes depend on it), except that fp32 with TF32
// denied stays on FMA math (PyTorch does the same). nullopt: the candidate would down-convert fp32 data to fp16.
std::optional<cudnnMathType_t> math_for(cudnnMathType_t candidate, DType type, Tf32 tf32) {
  if (type != DType::kF32) return candidate;
  if (candidate == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return std::nullopt;
  return tf32 == Tf32::kDeny ? CUDNN_FMA_MATH : candidate;
}

template <typename Algo>
struct Choice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t bytes = 0;
};

// The first candidate (cuDNN's ranking: heuristic order or measured time) that succeeded, meets the determinism
// requirement, and whose workspace, asked again for the math type it will run with, fits the limit. `set_math` sets
// the pass's descriptor; `size_of(algo, &bytes)` asks cuDNN for the workspace.
template <typename Perf, typename Algo, typename SetMath, typename SizeOf>
Choice<Algo> pick(const std::vector<Perf>& perf, int returned, DType type, const CudaOptions& o, const char* pass,
                  const ConvGeometry& g, SetMath set_math, SizeOf size_of) {
  for (int i = 0; i < returned; ++i) {
    const Perf& c = perf[static_cast<size_t>(i)];
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > o.workspace_limit) continue;
    if (o.determinism == Determinism::kRequired && c.determinism != CUDNN_DETERMINISTIC) continue;
    const std::optional<cudnnMathType_t> math = math_for(c.mathType, type, o.tf32);
    if (!math) continue;
    set_math(*math);
    size_t bytes = 0;
    if (size_of(c.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > o.workspace_limit) continue;
    return {c.algo, *math, bytes};
  }
  throw InvalidArgument(std::string("conv ") + pass + ": cuDNN has no algorithm for input " + g.input_shape().str() +
                        " -> " + g.output_shape().str() + " (" + dtype_name(type) + ") within a workspace of " +
                        std::to_string(o.workspace_limit) + " bytes" +
                        (o.determinism == Determinism::kRequired ? " that is deterministic" : ""));
}

}  // namespace

// --- plans --------------------------------------------------------------------------------------------------
struct CudaBackend::ConvPlan {
  TensorDesc x = make_tensor_desc(), y = make_tensor_desc();
  FilterDesc w = make_filter_desc();
  // One descriptor per pass: each carries the math type of the algorithm chosen for that pass.
  ConvDesc fwd_conv = make_conv_desc(), bwd_data_conv = make_conv_desc(), bwd_filter_conv = make_conv_desc();
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
};

CudaBackend::CudaBackend(const CudaOptions& options) : options_(options) {
  CUDA_CHECK(cudaSetDevice(options_.device));
  stream_ = make_stream();
  cudnn_ = make_cudnn(stream_.get());
  cublas_ = make_cublas(stream_.get());
  CUBLAS_CHECK(cublasSetMathMode(cublas_.get(),
                                 options_.tf32 == Tf32::kAllow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  cublas_workspace_ = allocate(kCublasWorkspace);
  CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), cublas_workspace_.data(), kCublasWorkspace));
  scalars_ = allocate(2 * sizeof(LossScalars));
  host_scalars_ = PinnedMemory(2 * sizeof(LossScalars) + sizeof(kmath::LossScaleState));
  TLOG(Info) << "cuda backend: device " << options_.device << " (" << device_description(options_.device) << "), cuDNN "
             << cudnnGetVersion() << ", TF32 " << (options_.tf32 == Tf32::kAllow ? "on" : "off") << ", conv search "
             << (options_.conv_search == ConvSearch::kBenchmark ? "benchmark" : "heuristic");
}

CudaBackend::~CudaBackend() { (void)cudaStreamSynchronize(stream_.get()); }

// --- memory ---------------------------------------------------------------------------------------------------
void CudaBackend::expect_not_capturing(const char* what) const {
  if (capturing())
    throw InvalidArgument(std::string("cuda backend: ") + what +
                          " inside a CUDA Graph capture; run one eager step of the same shapes before capturing");
}

Buffer CudaBackend::allocate(size_t bytes) {
  expect_not_capturing("allocating device memory");
  void* p = device_pool(options_.device).allocate(bytes);
  Buffer b(p, bytes, &device_free);
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_.get()));
  return b;
}

void CudaBackend::upload(const void* host, Tensor dst) {
  // From pageable memory the call returns once the source is staged, so `host` may be reused right away.
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), host, dst.bytes(), cudaMemcpyHostToDevice, stream_.get()));
  ++params_version_;
}

void CudaBackend::download(Tensor src, void* host) {
  CUDA_CHECK(cudaMemcpyAsync(host, src.data(), src.bytes(), cudaMemcpyDeviceToHost, stream_.get()));
  synchronize();
}

void CudaBackend::copy(Tensor src, Tensor dst) {
  expect_elements(dst, src.numel(), "copy destination");
  launch_convert(src.data(), src.dtype(), dst.data(), dst.dtype(), src.numel(), stream_.get());
  ++params_version_;
}

void CudaBackend::fill(Tensor t, float value) {
  launch_fill(t.data(), t.dtype(), t.numel(), value, stream_.get());
  ++params_version_;
}

void CudaBackend::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  check_labels_pending();
}

// Inside a capture, a plain record or wait only orders streams within the graph; the external flags make them
// nodes that record (or wait for) the event on every replay, so other streams outside the graph can use them.
void CudaBackend::wait_event(cudaEvent_t event) {
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), event, capturing() ? cudaEventWaitExternal : cudaEventWaitDefault));
}
void CudaBackend::record_event(cudaEvent_t event) {
  CUDA_CHECK(
      cudaEventRecordWithFlags(event, stream_.get(), capturing() ? cudaEventRecordExternal : cudaEventRecordDefault));
}

bool CudaBackend::capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_.get(), &status));
  return status != cudaStreamCaptureStatusNone;
}

void CudaBackend::pin_for_graph() {
  graph_pins_.pin(workspace_.data());
  for (const auto& [slot, b] : scratch_) graph_pins_.pin(b.data());
  for (const auto& [master, shadow] : shadows_) graph_pins_.pin(shadow.buffer.data());
  for (const Buffer* b : {&row_loss_, &ones_, &loss_scale_, &sgd_chunks_}) graph_pins_.pin(b->data());
}

void* CudaBackend::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Growing drops the old block into the pool (kept instead while a captured graph uses it); work queued on this
  // stream before is still ordered first.
  if (workspace_.bytes() < bytes) graph_pins_.replace(workspace_, allocate(bytes));
  return workspace_.data();
}

void* CudaBackend::scratch(int slot, size_t bytes) {
  Buffer& b = scratch_[slot];
  if (b.bytes() < bytes) graph_pins_.replace(b, allocate(std::max<size_t>(bytes, 256)));
  return b.data();
}

// A half-precision shadow of an fp32 master weight, converted again only after parameters changed.
Tensor CudaBackend::weights_as(Tensor w, DType type) {
  if (w.dtype() == type) return w;
  expect_dtype(w, DType::kF32, "conv weight (master)");
  Shadow& s = shadows_[w.data()];
  const size_t bytes = static_cast<size_t>(w.numel()) * dtype_size(type);
  if (s.buffer.bytes() < bytes || s.type != type) {  // a master seen in another half type converts again
    if (s.buffer.bytes() < bytes) graph_pins_.replace(s.buffer, allocate(bytes));
    s.type = type;
    s.version = 0;
  }
  Tensor shadow(s.buffer.data(), w.shape(), type);
  if (s.version != params_version_) {
    launch_convert(w.data(), DType::kF32, shadow.data(), type, w.numel(), stream_.get());
    s.version = params_version_;
  }
  return shadow;
}

// t itself when fp32, else an fp32 copy in a scratch slot.
Tensor CudaBackend::as_f32(Tensor t, int slot) {
  if (t.dtype() == DType::kF32) return t;
  Tensor f(scratch(slot, static_cast<size_t>(t.numel()) * sizeof(float)), t.shape(), DType::kF32);
  launch_convert(t.data(), t.dtype(), f.data(), DType::kF32, t.numel(), stream_.get());
  return f;
}

// --- convolution ------------------------------------------------------------------------------------------------
size_t CudaBackend::conv_weight_elements(const ConvGeometry& g) {
  return static_cast<size_t>(g.c_out * g.kh * g.kw * g.c_in);  // cuDNN's NHWC filter: (O, KH, KW, I), no padding
}

void CudaBackend::conv_weight_import(const ConvGeometry& g, const float* host_oihw, Tensor native) {
  expect_elements(native, static_cast<int64_t>(conv_weight_elements(g)), "conv weight (native)");
  std::vector<float> ohwi(conv_weight_elements(g));
  for (int64_t o = 0; o < g.c_out; ++o)
    for (int64_t i = 0; i < g.c_in; ++i)
      for (int64_t y = 0; y < g.kh; ++y)
        for (int64_t x = 0; x < g.kw; ++x)
          ohwi[static_cast<size_t>(kmath::ohwi_index(o, i, y, x, g.c_in, g.kh, g.kw))] =
              host_oihw[kmath::oihw_index(o, i, y, x, g.c_in, g.kh, g.kw)];
  upload(ohwi.data(), native);
}

void CudaBackend::conv_weight_export(const ConvGeometry& g, Tensor native, float* host_oihw) {
  expect_elements(native, static_cast<int64_t>(conv_weight_elements(g)), "conv weight (native)");
  std::vector<float> ohwi(conv_weight_elements(g));
  download(native, ohwi.data());
  for (int64_t o = 0; o < g.c_out; ++o)
    for (int64_t i = 0; i < g.c_in; ++i)
      for (int64_t y = 0; y < g.kh; ++y)
        for (int64_t x = 0; x < g.kw; ++x)
          host_oihw[kmath::oihw_index(o, i, y, x, g.c_in, g.kh, g.kw)] =
              ohwi[static_cast<size_t>(kmath::ohwi_index(o, i, y, x, g.c_in, g.kh, g.kw))];
}

CudaBackend::ConvPlan& CudaBackend::conv_plan(const ConvGeometry& g, DType type) {
  auto key = std::make_pair(g, type);
  auto it = conv_plans_.find(key);
  if (it != conv_plans_.end()) return *it->second;
  if (g.out_h() <= 0 || g.out_w() <= 0)
    throw InvalidArgument("conv: input " + g.input_shape().str() + " too small for a " + std::to_string(g.kh) + "x" +
                          std::to_string(g.kw) + " kernel");
  expect_not_capturing("planning a new convolution shape (cuDNN algorithm search)");
  auto p = std::make_unique<ConvPlan>();
  set_nhwc(p->x, type, g.n, g.h, g.w, g.c_in);
  set_nhwc(p->y, type, g.n, g.out_h(), g.out_w(), g.c_out);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w.get(), cudnn_type(type), CUDNN_TENSOR_NHWC, static_cast<int>(g.c_out),
                                         static_cast<int>(g.c_in), static_cast<int>(g.kh), static_cast<int>(g.kw)));
  const int pad = static_cast<int>(g.pad), stride = static_cast<int>(g.stride);
  // Tensor cores for half data; for fp32, TF32 (CUDNN_DEFAULT_MATH on Ampere+) unless denied (FMA only). The search
  // starts from this math type; each pass then runs with its chosen algorithm's own.
  const cudnnMathType_t math = type != DType::kF32             ? CUDNN_TENSOR_OP_MATH
                               : options_.tf32 == Tf32::kAllow ? CUDNN_DEFAULT_MATH
                                                               : CUDNN_FMA_MATH;
  for (const ConvDesc* d : {&p->fwd_conv, &p->bwd_data_conv, &p->bwd_filter_conv}) {
    // fp32 accumulation for every storage type (bf16/fp16 data, fp32 compute).
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d->get(), pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(d->get(), math));
  }
  const auto started = std::chrono::steady_clock::now();
  choose_conv_algorithms(*p, g, type);
  // Timed search runs every candidate (a ResNet-50 has ~20 shapes per dtype): what it costs at start-up is told
  // here, by the code that spent it, so that it can be weighed against the faster steps it may buy.
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  conv_search_.shapes += 1;
  conv_search_.seconds += seconds;
  TLOG(Info) << "conv algorithms for " << g.input_shape().str() << " -> " << g.output_shape().str() << " "
             << dtype_name(type) << " by "
             << (options_.conv_search == ConvSearch::kBenchmark ? "timed search" : "cuDNN's heuristics") << " in "
             << static_cast<int64_t>(seconds * 1000.0) << " ms (conv search so far: " << conv_search_.shapes
             << " shapes, " << conv_search_.seconds << " s): fwd " << p->fwd << ", bwd_data " << p->bwd_data
             << ", bwd_filter " << p->bwd_filter << ", workspace "
             << std::max({p->fwd_bytes, p->bwd_data_bytes, p->bwd_filter_bytes}) << " bytes";
  return *conv_plans_.emplace(key, std::move(p)).first->second;
}

void CudaBackend::choose_conv_algorithms(ConvPlan& p, const ConvGeometry& g, DType type) {
  cudnnHandle_t h = cudnn_.get();
  int returned = 0;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  auto math_setter = [](const ConvDesc& d) {
    return [&d](cudnnMathType_t m) { CUDNN_CHECK(cudnnSetConvolutionMathType(d.get(), m)); };
  };
  auto fwd_size = [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.x.get(), p.w.get(), p.fwd_conv.get(), p.y.get(), a, bytes);
  };
  auto bwd_data_size = [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.get(), p.y.get(), p.bwd_data_conv.get(), p.x.get(), a,
                                                        bytes);
  };
  auto bwd_filter_size = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.get(), p.y.get(), p.bwd_filter_conv.get(), p.w.get(),
                                                          a, bytes);
  };
  if (options_.conv_search == ConvSearch::kBenchmark) {
    // Timing runs need real buffers: scratch ones of this geometry, and the workspace at its limit.
    const size_t es = dtype_size(type);
    Buffer x = allocate(static_cast<size_t>(g.input_shape().numel()) * es);
    Buffer y = allocate(static_cast<size_t>(g.output_shape().numel()) * es);
    Buffer w = allocate(conv_weight_elements(g) * es);
    void* ws = workspace(options_.workspace_limit);
    const size_t wsb = options_.workspace_limit;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, p.x.get(), x.data(), p.w.get(), w.data(), p.fwd_conv.get(),
                                                       p.y.get(), y.data(), static_cast<int>(fwd.size()), &returned,
                                                       fwd.data(), ws, wsb));
    const auto f = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        fwd, returned, type, options_, "forward", g, math_setter(p.fwd_conv), fwd_size);
    p.fwd = f.algo;
    p.fwd_bytes = f.bytes;
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, p.w.get(), w.data(), p.y.get(), y.data(), p.bwd_data_conv.get(), p.x.get(), x.data(),
        static_cast<int>(bwd_data.size()), &returned, bwd_data.data(), ws, wsb));
    const auto d = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        bwd_data, returned, type, options_, "backward-data", g, math_setter(p.bwd_data_conv), bwd_data_size);
    p.bwd_data = d.algo;
    p.bwd_data_bytes = d.bytes;
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, p.x.get(), x.data(), p.y.get(), y.data(), p.bwd_filter_conv.get(), p.w.get(), w.data(),
        static_cast<int>(bwd_filter.size()), &returned, bwd_filter.data(), ws, wsb));
    const auto b = pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        bwd_filter, returned, type, options_, "backward-filter", g, math_setter(p.bwd_filter_conv), bwd_filter_size);
    p.bwd_filter = b.algo;
    p.bwd_filter_bytes = b.bytes;
  } else {
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.get(), p.w.get(), p.fwd_conv.get(), p.y.get(),
                                                       static_cast<int>(fwd.size()), &returned, fwd.data()));
    const auto f = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        fwd, returned, type, options_, "forward", g, math_setter(p.fwd_conv), fwd_size);
    p.fwd = f.algo;
    p.fwd_bytes = f.bytes;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.get(), p.y.get(), p.bwd_data_conv.get(), p.x.get(),
                                                            static_cast<int>(bwd_data.size()), &returned,
                                                            bwd_data.data()));
    const auto d = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        bwd_data, returned, type, options_, "backward-data", g, math_setter(p.bwd_data_conv), bwd_data_size);
    p.bwd_data = d.algo;
    p.bwd_data_bytes = d.bytes;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.get(), p.y.get(), p.bwd_filter_conv.get(),
                                                              p.w.get(), static_cast<int>(bwd_filter.size()), &returned,
                                                              bwd_filter.data()));
    const auto b = pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        bwd_filter, returned, type, options_, "backward-filter", g, math_setter(p.bwd_filter_conv), bwd_filter_size);
    p.bwd_filter = b.algo;
    p.bwd_filter_bytes = b.bytes;
  }
}

void CudaBackend::conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) {
  const DType type = x.dtype();
  expect_dtype(y, type, "conv output");
  expect_elements(x, g.input_shape().numel(), "conv input");
  expect_elements(y, g.output_shape().numel(), "conv output");
  expect_elements(w, static_cast<int64_t>(conv_weight_elements(g)), "conv weight");
  ConvPlan& p = conv_plan(g, type);
  Tensor wt = weights_as(w, type);
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(cudnn_.get(), &alpha, p.x.get(), x.data(), p.w.get(), wt.data(), p.fwd_conv.get(),
                                      p.fwd, workspace(p.fwd_bytes), p.fwd_bytes, &beta, p.y.get(), y.data()));
}

void CudaBackend::conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) {
  const DType type = dy.dtype();
  expect_dtype(dx, type, "conv input gradient");
  expect_elements(dy, g.output_shape().numel(), "conv output gradient");
  expect_elements(dx, g.input_shape().numel(), "conv input gradient");
  ConvPlan& p = conv_plan(g, type);
  Tensor wt = weights_as(w, type);
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_.get(), &alpha, p.w.get(), wt.data(), p.y.get(), dy.data(),
                                           p.bwd_data_conv.get(), p.bwd_data, workspace(p.bwd_data_bytes),
                                           p.bwd_data_bytes, &beta, p.x.get(), dx.data()));
}

void CudaBackend::conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) {
  const DType type = x.dtype();
  expect_dtype(dy, type, "conv output gradient");
  expect_elements(x, g.input_shape().numel(), "conv input");
  expect_elements(dy, g.output_shape().numel(), "conv output gradient");
  expect_elements(dw, static_cast<int64_t>(conv_weight_elements(g)), "conv weight gradient");
  ConvPlan& p = conv_plan(g, type);
  // cuDNN writes the filter gradient in the data type; a half gradient is widened into the fp32 gradient arena.
  void* target = dw.dtype() == type ? dw.data() : scratch(kWeightGradHalf, dw.numel() * dtype_size(type));
  const float alpha = 1.0f, beta = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_.get(), &alpha, p.x.get(), x.data(), p.y.get(), dy.data(),
                                             p.bwd_filter_conv.get(), p.bwd_filter, workspace(p.bwd_filter_bytes),
                                             p.bwd_filter_bytes, &beta, p.w.get(), target));
  if (target != dw.data()) launch_convert(target, type, dw.data(), dw.dtype(), dw.numel(), stream_.get());
}

// --- elementwise ------------------------------------------------------------------------------------------------
void CudaBackend::relu_forward(Tensor x, Tensor y) {
  expect_elements(y, x.numel(), "relu output");
  expect_dtype(y, x.dtype(), "relu output");
  launch_relu_forward(x.data(), y.data(), x.dtype(), x.numel(), stream_.get());
}

void CudaBackend::relu_backward(Tensor y, Tensor dy, Tensor dx) {
  expect_elements(dy, y.numel(), "relu output gradient");
  expect_elements(dx, y.numel(), "relu input gradient");
  expect_dtype(dy, y.dtype(), "relu output gradient");
  expect_dtype(dx, y.dtype(), "relu input gradient");
  launch_relu_backward(y.data(), dy.data(), dx.data(), y.dtype(), y.numel(), stream_.get());
}

void CudaBackend::add(Tensor a, Tensor b, Tensor y, Activation act) {
  expect_elements(b, a.numel(), "add operand");
  expect_elements(y, a.numel(), "add output");
  expect_dtype(b, a.dtype(), "add operand");
  expect_dtype(y, a.dtype(), "add output");
  launch_add(a.data(), b.data(), y.data(), a.dtype(), a.numel(), act == Activation::kRelu, stream_.get());
}

// --- linear (cuBLAS, column-major: a row-major (N, in) matrix is a column-major (in, N) one) ------------------------
void CudaBackend::linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) {
  expect_elements(x, g.n * g.in, "linear input");
  expect_elements(w, g.out * g.in, "linear weight");
  expect_elements(b, g.out, "linear bias");
  expect_elements(y, g.n * g.out, "linear output");
  Tensor xf = as_f32(x, kLinearX);
  float* yf =
      y.dtype() == DType::kF32 ? y.f32() : static_cast<float*>(scratch(kLinearY, static_cast<size_t>(y.numel()) * 4));
  const float one = 1.0f, zero = 0.0f;
  // y^T (out, N) = W (out, in) . x^T (in, N)
  CUBLAS_CHECK(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(g.out), static_cast<int>(g.n),
                           static_cast<int>(g.in), &one, w.f32(), static_cast<int>(g.in), xf.f32(),
                           static_cast<int>(g.in), &zero, yf, static_cast<int>(g.out)));
  launch_bias_add(yf, b.f32(), g.n, g.out, stream_.get());
  if (yf != y.data()) launch_convert(yf, DType::kF32, y.data(), y.dtype(), y.numel(), stream_.get());
}

void CudaBackend::linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) {
  expect_elements(dy, g.n * g.out, "linear output gradient");
  expect_elements(dx, g.n * g.in, "linear input gradient");
  Tensor dyf = as_f32(dy, kLinearDy);
  float* dxf = dx.dtype() == DType::kF32 ? dx.f32()
                                         : static_cast<float*>(scratch(kLinearDx, static_cast<size_t>(dx.numel()) * 4));
  const float one = 1.0f, zero = 0.0f;
  // dx^T (in, N) = W^T (in, out) . dy^T (out, N)
  CUBLAS_CHECK(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.in), static_cast<int>(g.n),
                           static_cast<int>(g.out), &one, w.f32(), static_cast<int>(g.in), dyf.f32(),
                           static_cast<int>(g.out), &zero, dxf, static_cast<int>(g.in)));
  if (dxf != dx.data()) launch_convert(dxf, DType::kF32, dx.data(), dx.dtype(), dx.numel(), stream_.get());
}

void CudaBackend::linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) {
  expect_elements(x, g.n * g.in, "linear input");
  expect_elements(dy, g.n * g.out, "linear output gradient");
  expect_elements(dw, g.out * g.in, "linear weight gradient");
  expect_elements(db, g.out, "linear bias gradient");
  Tensor xf = as_f32(x, kLinearX);
  Tensor dyf = as_f32(dy, kLinearDy);
  const float one = 1.0f, zero = 0.0f;
  // dW^T (in, out) = x^T (in, N) . dy (N, out)
  CUBLAS_CHECK(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(g.in), static_cast<int>(g.out),
                           static_cast<int>(g.n), &one, xf.f32(), static_cast<int>(g.in), dyf.f32(),
                           static_cast<int>(g.out), &zero, dw.f32(), static_cast<int>(g.in)));
  // db (out) = dy^T (out, N) . ones (N)
  if (ones_.bytes() < static_cast<size_t>(g.n) * sizeof(float)) {
    graph_pins_.replace(ones_, allocate(static_cast<size_t>(g.n) * sizeof(float)));
    launch_fill(ones_.data(), DType::kF32, g.n, 1.0f, stream_.get());
  }
  CUBLAS_CHECK(cublasSgemv(cublas_.get(), CUBLAS_OP_N, static_cast<int>(g.out), static_cast<int>(g.n), &one, dyf.f32(),
                           static_cast<int>(g.out), static_cast<const float*>(ones_.data()), 1, &zero, db.f32(), 1));
}

// --- loss and metrics ---------------------------------------------------------------------------------------------
LossScalars* CudaBackend::scalars() { return static_cast<LossScalars*>(scalars_.data()); }

const float* CudaBackend::loss_scale_ptr() const {
  return loss_scale_config_ ? &static_cast<const kmath::LossScaleState*>(loss_scale_.data())->scale : nullptr;
}

const int32_t* CudaBackend::skip_flag() const {
  return loss_scale_config_ ? &static_cast<const kmath::LossScaleState*>(loss_scale_.data())->found_inf : nullptr;
}

double CudaBackend::softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) {
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  expect_dtype(logits, DType::kF32, "logits");
  expect_elements(labels, n, "labels");
  if (!dlogits.empty()) expect_elements(dlogits, n * k, "logit gradient");
  if (row_loss_.bytes() < static_cast<size_t>(n) * sizeof(float))
    graph_pins_.replace(row_loss_, allocate(static_cast<size_t>(n) * 4));
  CUDA_CHECK(cudaMemsetAsync(scalars(), 0, sizeof(LossScalars), stream_.get()));
  launch_softmax_xent(logits.f32(), labels.i32(), n, k, smoothing, loss_scale_ptr(),
                      dlogits.empty() ? nullptr : dlogits.f32(), static_cast<float*>(row_loss_.data()), scalars(),
                      stream_.get());
  auto* host = static_cast<LossScalars*>(host_scalars_.get());
  CUDA_CHECK(cudaMemcpyAsync(host, scalars(), sizeof(LossScalars), cudaMemcpyDeviceToHost, stream_.get()));
  synchronize();
  if (host->bad_label != 0)
    throw InvalidArgument("labels: sample " + std::to_string(host->bad_label - 1) + " has a label outside [0, " +
                          std::to_string(k) + ")");
  return host->loss;
}

void CudaBackend::softmax_cross_entropy_async(Tensor logits, Tensor labels, float smoothing, Tensor dlogits,
                                              Tensor loss) {
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  expect_dtype(logits, DType::kF32, "logits");
  expect_elements(labels, n, "labels");
  expect_elements(loss, 1, "loss");
  if (!dlogits.empty()) expect_elements(dlogits, n * k, "logit gradient");
  if (row_loss_.bytes() < static_cast<size_t>(n) * sizeof(float))
    graph_pins_.replace(row_loss_, allocate(static_cast<size_t>(n) * 4));
  // The async steps' own slot, checked at the next synchronize(). Not reset per step: its bad_label keeps the first
  // bad sample of every step since the last check (replayed steps included), and only the check clears it.
  LossScalars* s = scalars() + 1;
  launch_softmax_xent(logits.f32(), labels.i32(), n, k, smoothing, loss_scale_ptr(),
                      dlogits.empty() ? nullptr : dlogits.f32(), static_cast<float*>(row_loss_.data()), s,
                      stream_.get());
  CUDA_CHECK(cudaMemcpyAsync(loss.data(), &s->loss, sizeof(float), cudaMemcpyDeviceToDevice, stream_.get()));
  labels_pending_ = true;
}

void CudaBackend::check_labels_pending() {
  if (!labels_pending_) return;
  labels_pending_ = false;
  LossScalars host{};
  CUDA_CHECK(cudaMemcpy(&host, scalars() + 1, sizeof host, cudaMemcpyDeviceToHost));
  if (host.bad_label != 0) {
    // Reported once: the next async steps start from a clean flag (the stream is idle: synchronize() waited).
    CUDA_CHECK(cudaMemsetAsync(&scalars()[1].bad_label, 0, sizeof(int32_t), stream_.get()));
    throw InvalidArgument("labels: sample " + std::to_string(host.bad_label - 1) +
                          " of a recent batch has a label outside the model's classes");
  }
}

int64_t CudaBackend::count_top_k(Tensor logits, Tensor labels, int k) {
  const int64_t n = logits.shape()[0], classes = logits.shape()[1];
  expect_dtype(logits, DType::kF32, "logits");
  expect_elements(labels, n, "labels");
  CUDA_CHECK(cudaMemsetAsync(scalars(), 0, sizeof(LossScalars), stream_.get()));
  launch_count_top_k(logits.f32(), labels.i32(), n, classes, k, scalars(), stream_.get());
  auto* host = static_cast<LossScalars*>(host_scalars_.get());
  CUDA_CHECK(cudaMemcpyAsync(host, scalars(), sizeof(LossScalars), cudaMemcpyDeviceToHost, stream_.get()));
  synchronize();
  if (host->bad_label != 0)
    throw InvalidArgument("labels: sample " + std::to_string(host->bad_label - 1) + " has a label outside [0, " +
                          std::to_string(classes) + ")");
  return host->correct;
}

// --- optimizer and loss scaling
// ---------------------------------------------------------------------------------------
void CudaBackend::enable_loss_scaling(const kmath::LossScaleConfig& config) {
  if (config.growth_interval <= 0)
    throw InvalidArgument("loss scaling: growth_interval must be positive, got " +
                          std::to_string(config.growth_interval));
  if (!(config.init_scale >= config.min_scale && config.init_scale <= config.max_scale))
    throw InvalidArgument("loss scaling: init_scale must lie in [min_scale, max_scale], got " +
                          std::to_string(config.init_scale));
  graph_pins_.replace(loss_scale_, allocate(sizeof(kmath::LossScaleState)));
  const kmath::LossScaleState initial = kmath::loss_scale_initial(config);
  CUDA_CHECK(cudaMemcpyAsync(loss_scale_.data(), &initial, sizeof initial, cudaMemcpyHostToDevice, stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // `initial` lives on this stack frame
  loss_scale_config_ = config;
}

void CudaBackend::unscale_gradients(Tensor grads) {
  if (!loss_scale_config_) throw InvalidArgument("unscale_gradients: loss scaling is not enabled");
  expect_dtype(grads, DType::kF32, "gradients");
  launch_unscale(grads.f32(), grads.numel(), static_cast<kmath::LossScaleState*>(loss_scale_.data()), stream_.get());
}

void CudaBackend::update_loss_scale() {
  if (!loss_scale_config_) throw InvalidArgument("update_loss_scale: loss scaling is not enabled");
  launch_loss_scale_update(static_cast<kmath::LossScaleState*>(loss_scale_.data()), *loss_scale_config_, stream_.get());
}

kmath::LossScaleState CudaBackend::loss_scale_state() {
  if (!loss_scale_config_) throw InvalidArgument("loss_scale_state: loss scaling is not enabled");
  auto* host =
      reinterpret_cast<kmath::LossScaleState*>(static_cast<char*>(host_scalars_.get()) + 2 * sizeof(LossScalars));
  CUDA_CHECK(cudaMemcpyAsync(host, loss_scale_.data(), sizeof *host, cudaMemcpyDeviceToHost, stream_.get()));
  synchronize();
  return *host;
}

void CudaBackend::set_loss_scale_state(const kmath::LossScaleState& state) {
  if (!loss_scale_config_) throw InvalidArgument("set_loss_scale_state: loss scaling is not enabled");
  if (!(state.scale > 0) || !kmath::is_finite(state.scale))
    throw InvalidArgument("set_loss_scale_state: the scale must be positive and finite, got " +
                          std::to_string(state.scale));
  kmath::LossScaleState restored = state;
  restored.found_inf = 0;  // a step starts unflagged
  CUDA_CHECK(cudaMemcpyAsync(loss_scale_.data(), &restored, sizeof restored, cudaMemcpyHostToDevice, stream_.get()));
  CUDA_CHECK(cudaStreamSynchronize(stream_.get()));  // `restored` lives on this stack frame
}

void CudaBackend::augment(const void* images_u8, Tensor out, const AugmentSpec& spec, uint64_t first_sample) {
  if (out.shape().rank() != 4) throw InvalidArgument("augment: output must be (N, H, W, C), got " + out.shape().str());
  const int64_t c = out.shape()[3];
  if (c > AugmentSpec::kMaxChannels)
    throw InvalidArgument("augment: at most " + std::to_string(AugmentSpec::kMaxChannels) + " channels, got " +
                          std::to_string(c));
  launch_augment(static_cast<const uint8_t*>(images_u8), out.data(), out.dtype(), out.shape()[0], out.shape()[1],
                 out.shape()[2], c, spec, first_sample, stream_.get());
}

std::unique_ptr<CudaBackend> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace torus::worker::cuda

#pragma once
// RAII owners for every CUDA, cuDNN, cuBLAS(Lt) and graph handle the backend holds. Each owner is move-only,
// destroys its handle exactly once, and never throws from its destructor (a failing destroy during teardown is
// ignored: the context may already be gone at process exit).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstddef>
#include <utility>

#include "worker/backend/cuda/errors.h"

namespace torus::worker::cuda {

template <typename T, auto Destroy>
class Owner {
 public:
  Owner() = default;
  explicit Owner(T handle) : handle_(handle) {}
  Owner(Owner&& other) noexcept : handle_(std::exchange(other.handle_, T{})) {}
  Owner& operator=(Owner&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, T{});
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  ~Owner() { reset(); }

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != T{}; }
  void reset() noexcept {
    if (handle_ != T{}) (void)Destroy(handle_);
    handle_ = T{};
  }

 private:
  T handle_{};
};

using Stream = Owner<cudaStream_t, cudaStreamDestroy>;
using Event = Owner<cudaEvent_t, cudaEventDestroy>;
using Graph = Owner<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owner<cudaGraphExec_t, cudaGraphExecDestroy>;
using CudnnHandle = Owner<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owner<cublasHandle_t, cublasDestroy>;
using CublasLtHandle = Owner<cublasLtHandle_t, cublasLtDestroy>;
using TensorDesc = Owner<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owner<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owner<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owner<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using ActivationDesc = Owner<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
// Communicators of the benchmarks; the training path's NCCL communicator is worker/comm/nccl's.
using NcclComm = Owner<ncclComm_t, ncclCommDestroy>;

// Priority of a stream: the copy stream runs at low priority so it never delays the step's kernels.
// kNormal is the device's greatest (highest) priority: compute and NCCL streams; kLow its least: batch uploads.
enum class StreamPriority : uint8_t { kNormal, kLow };
// Events for ordering only skip timing (cheaper to record and wait on).
enum class EventTiming : uint8_t { kOff, kOn };

inline Stream make_stream(StreamPriority priority = StreamPriority::kNormal) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  CUDA_CHECK(
      cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority == StreamPriority::kLow ? least : greatest));
  return Stream(s);
}

inline Event make_event(EventTiming timing = EventTiming::kOff) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, timing == EventTiming::kOn ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

inline CudnnHandle make_cudnn(cudaStream_t stream) {
  cudnnHandle_t h = nullptr;
  CUDNN_CHECK(cudnnCreate(&h));
  CudnnHandle owner(h);
  CUDNN_CHECK(cudnnSetStream(h, stream));
  return owner;
}

inline CublasHandle make_cublas(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cublasCreate(&h));
  CublasHandle owner(h);
  CUBLAS_CHECK(cublasSetStream(h, stream));
  return owner;
}

inline CublasLtHandle make_cublaslt() {
  cublasLtHandle_t h = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&h));
  return CublasLtHandle(h);
}

inline TensorDesc make_tensor_desc() {
  cudnnTensorDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}

inline FilterDesc make_filter_desc() {
  cudnnFilterDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&d));
  return FilterDesc(d);
}

inline ConvDesc make_conv_desc() {
  cudnnConvolutionDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  return ConvDesc(d);
}

inline PoolDesc make_pool_desc() {
  cudnnPoolingDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
  return PoolDesc(d);
}

inline ActivationDesc make_activation_desc() {
  cudnnActivationDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateActivationDescriptor(&d));
  return ActivationDesc(d);
}

// Device memory of an exact size, outside the caching pool (staging slots that live for the whole run).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { release(); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory: the only kind an asynchronous H2D copy can overlap with compute.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  explicit PinnedMemory(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  }
  PinnedMemory(PinnedMemory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedMemory& operator=(PinnedMemory&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() { release(); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace torus::worker::cuda

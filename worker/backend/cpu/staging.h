#pragma once
// Activations cross the CPU backend's interface in NHWC. For wide convolutions oneDNN 2.6.3's jit:avx2 kernels run
// 15-30% faster on the channel-blocked layout (nChw8c) they pick for themselves (ResNet-18 at 32x32, batch 64,
// 1 thread: 64->64 at 32x32 forward 73 -> 54 ms, backward weights 99 -> 71 ms), far more than the reorders at
// the boundary cost (one pass over the tensor each). A Stage converts one argument between the two layouts through
// a buffer the backend shares between all stages (only one primitive runs at a time).
#include <dnnl.hpp>
#include <cstdint>
#include <optional>

#include "worker/tensor/tensor.h"

namespace torus::worker::cpu {

// Which way a stage converts: a primitive's input into its layout, or its output back to NHWC.
enum class StageDirection : uint8_t { kIn, kOut };

class Stage {
 public:
  Stage() = default;
  // plain: the NHWC layout the caller holds; inner: the layout the primitive wants.
  Stage(const dnnl::engine& engine, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner,
        StageDirection direction)
      : plain_(plain), inner_(inner) {
    if (plain == inner) return;
    const bool in = direction == StageDirection::kIn;
    dnnl::memory a(in ? plain : inner, engine, DNNL_MEMORY_NONE);
    dnnl::memory b(in ? inner : plain, engine, DNNL_MEMORY_NONE);
    reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(a, b));
  }
  bool active() const { return reorder_.has_value(); }
  size_t bytes() const { return active() ? inner_.get_size() : 0; }

  // The primitive's input: t itself, or t converted into `scratch`.
  dnnl::memory in(const dnnl::engine& engine, dnnl::stream& stream, Tensor t, void* scratch) const {
    dnnl::memory plain(plain_, engine, t.data());
    if (!active()) return plain;
    dnnl::memory inner(inner_, engine, scratch);
    reorder_->execute(stream, plain, inner);
    return inner;
  }
  // The primitive's output: t itself, or `scratch`, which finish() converts into t afterwards.
  dnnl::memory out(const dnnl::engine& engine, Tensor t, void* scratch) const {
    return dnnl::memory(active() ? inner_ : plain_, engine, active() ? scratch : t.data());
  }
  void finish(const dnnl::engine& engine, dnnl::stream& stream, dnnl::memory inner, Tensor t) const {
    if (!active()) return;
    dnnl::memory plain(plain_, engine, t.data());
    reorder_->execute(stream, inner, plain);
  }

 private:
  dnnl::memory::desc plain_, inner_;
  std::optional<dnnl::reorder> reorder_;
};

}  // namespace torus::worker::cpu

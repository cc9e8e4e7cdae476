#pragma once
// The CPU backend's activation layouts. oneDNN 2.6.3's jit:avx2 kernels run wide convolutions 15-30% faster on the
// channel-blocked layout nChw8c (eight channels innermost, then the pixels, then the channel blocks) than on NHWC
// (ResNet-18 at 32x32, batch 64, 1 thread: 64->64 at 32x32 forward 73 -> 54 ms, backward weights 99 -> 71 ms).
// Activations of at least kBlockedMinChannels channels (a multiple of the block) therefore live in nChw8c (nChw16c
// on AVX-512, see channel_block) from the op that
// writes them to the op that reads them: convolution, batch norm, ReLU and the residual add all run on it, and
// pooling reads it as NHWC images of one block's channels (blocked_pool_geometry), so no reorder runs between layers.
// Narrower activations stay NHWC: for the narrow ResNet-9 (8-32 channels) the blocked kernels are no faster.
// A (N, 1, 1, C) activation (the global pool's output) is the same bytes in both layouts, so the linear head and
// the model's images never see the difference; tests and tools convert with Backend::activation_import/export.
// A Stage converts one convolution argument between the tensor's layout and the primitive's where they differ
// (an NHWC input of a convolution whose output is blocked), through a buffer the backend shares between all stages
// (only one primitive runs at a time).
#include <cstdint>
#include <dnnl.hpp>
#include <optional>

#include "worker/backend/backend.h"
#include "worker/tensor/tensor.h"

namespace torus::worker::cpu {

constexpr int64_t kBlockedMinChannels = 64;

// Channels per block: the floats of one vector of the widest ISA oneDNN runs here, 16 where it runs avx512_core (or
// later), else 8. oneDNN's AVX-512 kernels want nChw16c: given nChw8c they fall back to its AVX2 kernels, which made
// ResNet-18 (32x32, batch 64, 1 thread) 19-20 img/s where nChw16c gives 34-38 on the same AVX-512 machine.
// ONEDNN_MAX_CPU_ISA=AVX2 lowers it to 8, as on an AVX2 machine. Decided once per process.
inline int64_t channel_block() {
  static const int64_t block = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return (isa & avx512) == avx512 ? int64_t{16} : int64_t{8};
  }();
  return block;
}

// Whether an activation of c channels lives in the blocked layout (else NHWC).
inline bool blocked_channels(int64_t c) { return c >= kBlockedMinChannels && c % channel_block() == 0; }

// Plain layouts: an (N, H, W, C) tensor as NHWC, n floats in a row.
inline dnnl::memory::desc nhwc_desc(int64_t n, int64_t h, int64_t w, int64_t c) {
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
}
inline dnnl::memory::desc flat_desc(int64_t n) {
  return dnnl::memory::desc({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
}

// The layout an (N, H, W, C) activation lives in.
inline dnnl::memory::desc activation_desc(int64_t n, int64_t h, int64_t w, int64_t c) {
  using tag = dnnl::memory::format_tag;
  const tag blocked = channel_block() == 16 ? tag::nChw16c : tag::nChw8c;
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32, blocked_channels(c) ? blocked : tag::nhwc);
}

// A blocked activation (N, H, W, C) is N * C / block NHWC images of block channels: a pool, which never mixes channels,
// runs on it as on those.
inline PoolGeometry blocked_pool_geometry(PoolGeometry g) {
  if (!blocked_channels(g.c)) return g;
  g.n *= g.c / channel_block();
  g.c = channel_block();
  return g;
}

// The layouts a convolution's primitives are asked for: the tensors' own when they agree (no staging), oneDNN's
// choice when one side is blocked and the other is not (the stem, a narrow stage feeding a wide one): the Stages
// then convert the side that differs.
struct ConvLayouts {
  dnnl::memory::desc src, dst;        // the tensors' layouts (activation_desc)
  dnnl::memory::desc src_in, dst_in;  // what the primitives are created with
};

inline dnnl::memory::desc any_layout(int64_t n, int64_t h, int64_t w, int64_t c) {
  return dnnl::memory::desc({n, c, h, w}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

inline ConvLayouts conv_layouts(const ConvGeometry& g) {
  ConvLayouts l{activation_desc(g.n, g.h, g.w, g.c_in), activation_desc(g.n, g.out_h(), g.out_w(), g.c_out), {}, {}};
  const bool mixed = blocked_channels(g.c_in) != blocked_channels(g.c_out);
  l.src_in = mixed ? any_layout(g.n, g.h, g.w, g.c_in) : l.src;
  l.dst_in = mixed ? any_layout(g.n, g.out_h(), g.out_w(), g.c_out) : l.dst;
  return l;
}

// Which way a stage converts: a primitive's input into its layout, or its output back to the tensor's.
enum class StageDirection : uint8_t { kIn, kOut };

class Stage {
 public:
  Stage() = default;
  // plain: the layout the caller's tensor is in; inner: the layout the primitive wants.
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

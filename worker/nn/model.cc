#include "worker/nn/model.h"

#include "common/util/error.h"

namespace torus::worker::nn {
namespace {

// Tracks the activation size while layers are added, so each conv is laid out for the input it will see.
class Builder {
 public:
  Builder(Context& ctx, const ModelConfig& cfg)
      : ctx_(ctx),
        size_{cfg.batch_size, cfg.image_size, cfg.image_size},
        channels_(cfg.in_channels),
        last_gamma_(cfg.zero_init_residual == ZeroInitResidual::kOn ? GammaInit::kZero : GammaInit::kOne) {}

  std::unique_ptr<Sequential> conv_bn(const std::string& name, int64_t c_out, int64_t kernel, int64_t stride,
                                      Activation act, GammaInit gamma = GammaInit::kOne,
                                      InputGrad input_grad = InputGrad::kCompute, NormThen then = NormThen::kNothing) {
    auto seq = std::make_unique<Sequential>();
    seq->append(conv(name, c_out, kernel, stride, input_grad));
    seq->add<BatchNorm2d>(ctx_, name + ".bn", c_out, act, gamma, 0.1f, 1e-5f, then);
    if (then == NormThen::kMaxPool2x2) pooled(2, 2, 0);
    return seq;
  }

  // The conv of a conv + BN pair (`name`.conv), the size after it tracked.
  std::unique_ptr<Conv2d> conv(const std::string& name, int64_t c_out, int64_t kernel, int64_t stride,
                               InputGrad input_grad = InputGrad::kCompute) {
    const int64_t pad = kernel / 2;
    auto c = std::make_unique<Conv2d>(ctx_, name + ".conv", channels_, c_out, kernel, stride, pad, size_, input_grad);
    size_.h = output_extent(size_.h, kernel, stride, pad);
    size_.w = output_extent(size_.w, kernel, stride, pad);
    if (size_.h <= 0 || size_.w <= 0)
      throw InvalidArgument("model: image_size too small for this network (" + name + " has no pixels left)");
    channels_ = c_out;
    return c;
  }

  // The size after a pooling stage.
  void pooled(int64_t kernel, int64_t stride, int64_t pad) {
    size_.h = output_extent(size_.h, kernel, stride, pad);
    size_.w = output_extent(size_.w, kernel, stride, pad);
    if (size_.h <= 0 || size_.w <= 0)
      throw InvalidArgument("model: image_size too small for this network (a pooling stage has no pixels left)");
  }

  std::unique_ptr<Module> pool(PoolKind kind, int64_t kernel, int64_t stride, int64_t pad = 0) {
    pooled(kernel, stride, pad);
    return std::make_unique<Pool2d>(ctx_, kind, kernel, stride, pad);
  }

  // Basic block (two 3x3) or bottleneck (1x1, 3x3, 1x1 x4), with a 1x1 conv + BN shortcut on a shape change.
  std::unique_ptr<Module> block(const std::string& name, int64_t width, int64_t stride, Arch arch) {
    const InputSize in_size = size_;
    const int64_t in_channels = channels_;
    auto branch = std::make_unique<Sequential>();
    int64_t out_channels = width;
    // The branch's last conv + BN: the conv ends the branch, its BN is the join's (BN + add + ReLU), built in the
    // same order (the parameters keep their names and indices).
    std::string last = name + ".2";
    if (arch == Arch::kResNet50) {
      out_channels = width * 4;
      branch->append(conv_bn(name + ".1", width, 1, 1, Activation::kRelu));
      branch->append(conv_bn(name + ".2", width, 3, stride, Activation::kRelu));
      last = name + ".3";
      branch->append(conv(last, out_channels, 1, 1));
    } else {
      branch->append(conv_bn(name + ".1", width, 3, stride, Activation::kRelu));
      branch->append(conv(last, width, 3, 1));
    }
    auto norm = std::make_unique<BatchNorm2d>(ctx_, last + ".bn", out_channels, Activation::kNone, last_gamma_);
    std::unique_ptr<Sequential> shortcut;
    if (stride != 1 || in_channels != out_channels) {
      const InputSize out_size = size_;
      size_ = in_size;
      channels_ = in_channels;
      shortcut = conv_bn(name + ".shortcut", out_channels, 1, stride, Activation::kNone);
      size_ = out_size;
    }
    return std::make_unique<ResidualJoin>(ctx_, std::move(branch), std::move(norm), std::move(shortcut));
  }

  int64_t channels() const { return channels_; }

 private:
  Context& ctx_;
  InputSize size_;
  int64_t channels_;
  GammaInit last_gamma_;
};

void build_resnet9(Builder& b, Context& ctx, const ModelConfig& cfg, Sequential& net) {
  std::vector<int64_t> w = cfg.widths.empty() ? std::vector<int64_t>{64, 128, 256, 512} : cfg.widths;
  if (w.size() < 2) throw InvalidArgument("model.widths: resnet9 needs a prep width and at least one stage width");
  net.append(b.conv_bn("prep", w[0], 3, 1, Activation::kRelu, GammaInit::kOne, InputGrad::kSkip));
  const size_t stages = w.size() - 1;
  for (size_t s = 1; s <= stages; ++s) {
    const std::string name = "layer" + std::to_string(s);
    // conv -> BN + ReLU -> 2x2 max pool, the pool inside the BN layer (one op where the backend has it).
    net.append(
        b.conv_bn(name, w[s], 3, 1, Activation::kRelu, GammaInit::kOne, InputGrad::kCompute, NormThen::kMaxPool2x2));
    if (s == 1 || s == stages) {
      // Page's residual ends in BN + ReLU: a zero gamma would make the ReLU's gradient zero forever, so
      // this block keeps gamma = 1 (zero-init applies to blocks whose last BN feeds the residual add).
      auto body = std::make_unique<Sequential>();
      body->append(b.conv_bn(name + ".res1", w[s], 3, 1, Activation::kRelu));
      body->append(b.conv_bn(name + ".res2", w[s], 3, 1, Activation::kRelu));
      net.add<Residual>(ctx, std::move(body));
    }
  }
}

void build_resnet(Builder& b, const ModelConfig& cfg, Sequential& net) {
  std::vector<int64_t> w = cfg.widths.empty() ? std::vector<int64_t>{64, 128, 256, 512} : cfg.widths;
  if (w.size() != 4)
    throw InvalidArgument("model.widths: " + std::string(api::to_string(cfg.arch)) + " needs 4 stage widths");
  std::vector<int> depth = cfg.arch == Arch::kResNet18 ? std::vector<int>{2, 2, 2, 2} : std::vector<int>{3, 4, 6, 3};
  if (cfg.stem == Stem::kImageNet) {
    net.append(b.conv_bn("stem", w[0], 7, 2, Activation::kRelu, GammaInit::kOne, InputGrad::kSkip));
    net.append(b.pool(PoolKind::kMax, 3, 2, 1));
  } else {
    net.append(b.conv_bn("stem", w[0], 3, 1, Activation::kRelu, GammaInit::kOne, InputGrad::kSkip));
  }
  for (size_t s = 0; s < 4; ++s) {
    for (int i = 0; i < depth[s]; ++i) {
      const int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      net.append(b.block("layer" + std::to_string(s + 1) + "." + std::to_string(i), w[s], stride, cfg.arch));
    }
  }
}

}  // namespace

Model::Model(Backend& backend, const ModelConfig& config) : config_(config), ctx_(std::make_unique<Context>(backend)) {
  if (config.in_channels <= 0 || config.num_classes <= 1 || config.batch_size <= 0 || config.image_size <= 0)
    throw InvalidArgument("model: in_channels, batch_size, image_size must be positive and num_classes >= 2");
  ctx_->activation_dtype = config.activation_dtype;
  Builder b(*ctx_, config);
  if (config.arch == Arch::kResNet9)
    build_resnet9(b, *ctx_, config, net_);
  else
    build_resnet(b, config, net_);
  net_.add<Pool2d>(*ctx_, config.head_pool, 0, 1);
  net_.add<Linear>(*ctx_, "fc", b.channels(), config.num_classes);
  auto alloc = [&backend](size_t bytes) { return backend.allocate(bytes); };
  ctx_->params.allocate(alloc);
  ctx_->stats.allocate(alloc);
  ctx_->grads = ctx_->params.mirror(alloc);
  init(config.seed);
}

void Model::init(uint64_t seed) { net_.init(seed); }

Tensor Model::forward(Tensor images, Mode mode) {
  // The first layer's input is an activation like any other: a mismatch would reach the backend as a dtype error
  // deep inside a conv, so it is named here.
  if (images.dtype() != ctx_->activation_dtype)
    throw InvalidArgument(std::string("model: images are ") + dtype_name(images.dtype()) + ", activations " +
                          dtype_name(ctx_->activation_dtype) + " (convert the batch first)");
  ctx_->mode = mode;
  Tensor y = net_.forward(images);
  return y.reshaped({images.shape()[0], config_.num_classes});
}

void Model::backward(Tensor dlogits) { net_.backward(dlogits); }

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const auto& e : ctx_->params.entries()) n += e.logical_shape.numel();
  return n;
}

std::vector<float> export_plain(Context& ctx, const Arena& arena) {
  int64_t total = 0;
  for (const auto& e : arena.entries()) total += e.logical_shape.numel();
  std::vector<float> out(static_cast<size_t>(total));
  float* at = out.data();
  for (size_t i = 0; i < arena.size(); ++i) {
    const ArenaEntry& e = arena.entry(i);
    auto layout = ctx.conv_layouts.find(i);
    if (e.kind == ParamKind::kConvWeight && layout != ctx.conv_layouts.end())
      ctx.backend.conv_weight_export(layout->second, arena.view(i), at);
    else
      ctx.backend.download(arena.view(i).reshaped(e.logical_shape), at);
    at += e.logical_shape.numel();
  }
  return out;
}

void import_plain(Context& ctx, const Arena& arena, std::span<const float> values) {
  int64_t total = 0;
  for (const auto& e : arena.entries()) total += e.logical_shape.numel();
  if (static_cast<int64_t>(values.size()) != total)
    throw InvalidArgument("import: expected " + std::to_string(total) + " values, got " +
                          std::to_string(values.size()));
  const float* at = values.data();
  for (size_t i = 0; i < arena.size(); ++i) {
    const ArenaEntry& e = arena.entry(i);
    auto layout = ctx.conv_layouts.find(i);
    if (e.kind == ParamKind::kConvWeight && layout != ctx.conv_layouts.end())
      ctx.backend.conv_weight_import(layout->second, at, arena.view(i));
    else
      ctx.backend.upload(at, arena.view(i).reshaped(e.logical_shape));
    at += e.logical_shape.numel();
  }
}

}  // namespace torus::worker::nn

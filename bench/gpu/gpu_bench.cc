// GPU benchmarks of the CUDA backend, for a machine with NVIDIA GPUs (bench/gpu/gpu.sh runs them next to PyTorch):
//   torus_gpu_bench check                        # exit 3 with "no CUDA device" when none is visible
//   torus_gpu_bench resnet50 [--batch 128] [--steps 30] [--warmup 10] [--precision tf32|bf16]
//                            [--search trainer|heuristic|timed]
//   torus_gpu_bench resnet9 --data DIR [--epochs 24] [--batch 512] [--lr 0.4] [--target 0.94]
//   torus_gpu_bench nccl [--max-bytes 1073741824] [--iters 20]
// Each ends with a `RESULT name=value ...` line.
#include <cuda_profiler_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/metrics/rates.h"
#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/errors.h"
#include "worker/backend/cuda/handles.h"
#include "worker/backend/cuda/staging.h"
#include "worker/data/cifar.h"
#include "worker/nn/model.h"
#include "worker/optim/schedule.h"
#include "worker/optim/sgd.h"

namespace torus::worker::cuda {
namespace {

constexpr int kNoDevice = 3;

class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) {
      std::string key = argv[i];
      if (key.rfind("--", 0) != 0 || i + 1 >= argc)
        throw InvalidArgument("argument " + key + ": expected --name value");
      values_[key.substr(2)] = argv[++i];
    }
  }
  std::string str(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t integer(const std::string& key, int64_t fallback) const {
    const std::string v = str(key, std::to_string(fallback));
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || n <= 0)
      throw InvalidArgument("--" + key + ": expected a positive integer, got \"" + v + "\"");
    return n;
  }
  double real(const std::string& key, double fallback) const {
    const std::string v = str(key, std::to_string(fallback));
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0') throw InvalidArgument("--" + key + ": expected a number, got \"" + v + "\"");
    return x;
  }

 private:
  std::map<std::string, std::string> values_;
};

std::string no_spaces(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == ',') c = '_';
  return s;
}

bool require_device() {
  if (device_count() > 0) return true;
  std::cerr << "no CUDA device: cudaGetDeviceCount found none; the GPU benchmarks need an NVIDIA GPU\n";
  return false;
}

struct Held {
  Buffer buffer;
  Tensor t;
};
Held make(Backend& b, Shape s, DType type = DType::kF32) {
  Held h{b.allocate(static_cast<size_t>(s.numel()) * dtype_size(type)), {}};
  h.t = h.buffer.view(s, type);
  return h;
}

double seconds_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms / 1000.0;
}

int check() {
  if (!require_device()) return kNoDevice;
  for (int d = 0; d < device_count(); ++d) std::cout << "device " << d << ": " << device_description(d) << "\n";
  return 0;
}

// --precision: tf32 (fp32 activations, TF32 products) or bf16 (bf16 activations, fp32 master weights: the
// trainer's `precision: bf16`, PyTorch's bf16 autocast in the peer).
DType activations_for(const std::string& precision) {
  if (precision == "tf32") return DType::kF32;
  if (precision == "bf16") return DType::kBF16;
  throw InvalidArgument("--precision: expected tf32 or bf16, got \"" + precision + "\"");
}

// --search: the convolutions' algorithm choice. "trainer" is what a rank of the trainer gets (cuda_options_for_rank:
// cuDNN's heuristics, or the timed search under TORUS_CUDNN_BENCHMARK=1, and the other TORUS_CUDA*/TORUS_CUDNN*
// tunables); "heuristic" and "timed" force one on top of those.
CudaOptions options_for(const std::string& search) {
  CudaOptions o = cuda_options_for_rank(0, 1);
  if (search == "heuristic") {
    o.conv_search = ConvSearch::kHeuristic;
  } else if (search == "timed") {
    o.conv_search = ConvSearch::kBenchmark;
  } else if (search != "trainer") {
    throw InvalidArgument("--search: expected trainer, heuristic or timed, got \"" + search + "\"");
  }
  return o;
}

const char* search_name(ConvSearch search) { return search == ConvSearch::kBenchmark ? "timed" : "heuristic"; }

// Images/s of full training steps (forward, loss, backward, SGD) on synthetic 224 px images, per GPU, eager (the
// trainer replays the same kernels as a CUDA graph).
int resnet50(const Args& args) {
  if (!require_device()) return kNoDevice;
  const int64_t batch = args.integer("batch", 128), steps = args.integer("steps", 30),
                warmup = args.integer("warmup", 10);
  const std::string precision = args.str("precision", "tf32");
  const DType activations = activations_for(precision);
  const CudaOptions o = options_for(args.str("search", "trainer"));
  auto b = make_cuda_backend(o);
  nn::ModelConfig cfg;
  cfg.arch = api::Arch::kResNet50;
  cfg.stem = api::Stem::kImageNet;
  cfg.in_channels = 3;
  cfg.num_classes = 1000;
  cfg.head_pool = PoolKind::kAvg;
  cfg.batch_size = batch;
  cfg.image_size = 224;
  cfg.activation_dtype = activations;
  nn::Model model(*b, cfg);
  optim::Sgd sgd(*b, model.context().params, {});
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> host(static_cast<size_t>(batch * 224 * 224 * 3));
  for (float& v : host) v = normal(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i * 7 % 1000);
  Held x32 = make(*b, {batch, 224, 224, 3}), x = make(*b, {batch, 224, 224, 3}, activations),
       y = make(*b, {batch}, DType::kI32), dz = make(*b, {batch, 1000}), loss = make(*b, {1});
  b->upload(host.data(), x32.t);
  b->copy(x32.t, x.t);  // converts to the activations' dtype
  b->upload(labels.data(), y.t);
  auto step = [&] {
    Tensor logits = model.forward(x.t, Mode::kTrain);
    b->softmax_cross_entropy_async(logits, y.t, 0.1f, dz.t, loss.t);
    model.backward(dz.t);
    sgd.step(model.context().params, model.context().grads, 0.1f);
  };
  for (int64_t i = 0; i < warmup; ++i) step();
  b->synchronize();
  Event start = make_event(EventTiming::kOn), stop = make_event(EventTiming::kOn);
  // Only the timed steps between cudaProfilerStart/Stop: `ncu --profile-from-start off` profiles those alone.
  CUDA_CHECK(cudaProfilerStart());
  b->record_event(start.get());
  const auto host_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) step();
  const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  b->record_event(stop.get());
  b->synchronize();
  CUDA_CHECK(cudaProfilerStop());
  const double s = seconds_between(start.get(), stop.get());
  const double ips = static_cast<double>(batch * steps) / s;
  // The host's time to issue the steps: near the device time when the host, not the GPU, sets the pace.
  const auto search = b->conv_search_stats();
  std::printf(
      "# resnet50 %s batch %lld: %.1f ms/step (host issues a step in %.1f ms), peak pool %.2f GiB, conv algorithms "
      "by %s for %lld shapes in %.2f s\n",
      precision.c_str(), static_cast<long long>(batch), 1000.0 * s / static_cast<double>(steps),
      1000.0 * host_s / static_cast<double>(steps),
      static_cast<double>(b->memory_stats().peak_bytes) / static_cast<double>(size_t{1} << 30),
      search_name(o.conv_search), static_cast<long long>(search.shapes), search.seconds);
  std::printf("RESULT resnet50_images_per_s=%.1f batch=%lld image=224 precision=%s search=%s device=%s\n", ips,
              static_cast<long long>(batch), precision.c_str(), search_name(o.conv_search),
              no_spaces(device_description(0)).c_str());
  return 0;
}

// Page's ResNet-9 on CIFAR-10: u8 batches staged through pinned memory, augmented on the device (4 px
// translation, flip), Nesterov SGD with a linear warm-up and decay, evaluated after every epoch.
int resnet9(const Args& args) {
  if (!require_device()) return kNoDevice;
  const std::string dir = args.str("data", std::getenv("CIFAR10_DIR") ? std::getenv("CIFAR10_DIR") : "");
  if (dir.empty()) throw InvalidArgument("--data: the CIFAR-10 binary folder (cifar-10-batches-bin) is required");
  const int64_t epochs = args.integer("epochs", 24), batch = args.integer("batch", 512);
  const double peak = args.real("lr", 0.4), target = args.real("target", 0.94);
  auto train = data::load_cifar10(dir, data::Split::kTrain);
  auto val = data::load_cifar10(dir, data::Split::kVal);
  auto b = make_cuda_backend({});
  nn::ModelConfig cfg;
  cfg.arch = api::Arch::kResNet9;
  cfg.widths = {64, 128, 256, 512};
  cfg.batch_size = batch;
  cfg.image_size = 32;
  nn::Model model(*b, cfg);
  optim::Sgd sgd(*b, model.context().params, {0.9f, math::Nesterov::kOn, 5e-4f});
  const auto schedule = optim::LrSchedule::warmup_then_linear_decay(peak, 5.0 / 24.0, static_cast<double>(epochs));
  AugmentSpec aug, plain;
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, stddev[3] = {0.2470f, 0.2435f, 0.2616f};
  for (int c = 0; c < 3; ++c) {
    aug.mean[c] = plain.mean[c] = mean[c];
    aug.inv_std[c] = plain.inv_std[c] = 1.0f / stddev[c];
  }
  aug.max_shift = 4;
  aug.flip = true;
  const size_t image_bytes = 32 * 32 * 3;
  const int64_t n_train = train->size(), n_val = val->size(), steps = n_train / batch;
  BatchStager stager(*b, static_cast<size_t>(batch) * image_bytes, static_cast<size_t>(batch) * sizeof(int32_t));
  Held val_images = make(*b, {static_cast<int64_t>(val->pixels().size() / 4 + 1)});
  b->synchronize();  // allocate() zero-fills on the compute stream; the copy below runs on another stream
  CUDA_CHECK(cudaMemcpy(val_images.t.data(), val->pixels().data(), val->pixels().size(), cudaMemcpyHostToDevice));
  Held val_labels = make(*b, {n_val}, DType::kI32);
  b->upload(val->labels().data(), val_labels.t);
  Held x = make(*b, {batch, 32, 32, 3}), dz = make(*b, {batch, 10}), loss = make(*b, {1});
  std::vector<uint8_t> host_images(static_cast<size_t>(batch) * image_bytes);
  std::vector<int32_t> host_labels(static_cast<size_t>(batch));
  std::vector<int64_t> order(static_cast<size_t>(n_train));
  double train_seconds = 0, accuracy = 0;
  int64_t epoch = 0;
  for (; epoch < epochs && accuracy < target; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(static_cast<uint64_t>(epoch)));
    auto stage = [&](int64_t i) {
      for (int64_t j = 0; j < batch; ++j) {
        const auto src = static_cast<size_t>(order[static_cast<size_t>(i * batch + j)]);
        std::copy_n(train->pixels().data() + src * image_bytes, image_bytes,
                    host_images.data() + static_cast<size_t>(j) * image_bytes);
        host_labels[static_cast<size_t>(j)] = train->labels()[src];
      }
      return stager.stage(host_images.data(), host_images.size(), host_labels.data(),
                          host_labels.size() * sizeof(int32_t));
    };
    b->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    int next = stage(0);
    for (int64_t i = 0; i < steps; ++i) {
      const int cur = next;
      if (i + 1 < steps) next = stage(i + 1);  // the copy of batch i+1 overlaps step i
      auto [images, labels] = stager.acquire(cur);
      b->augment(images, x.t, aug, static_cast<uint64_t>((epoch * steps + i) * batch));
      Tensor logits = model.forward(x.t, Mode::kTrain);
      b->softmax_cross_entropy_async(logits, Tensor(labels, {batch}, DType::kI32), 0.2f, dz.t, loss.t);
      model.backward(dz.t);
      sgd.step(model.context().params, model.context().grads,
               static_cast<float>(schedule.at(static_cast<double>(epoch) + static_cast<double>(i) / steps)));
      stager.release(cur);
    }
    b->synchronize();
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t correct = 0;
    const int64_t eval_batch = 1000;
    for (int64_t i = 0; i + eval_batch <= n_val; i += eval_batch) {
      Held xe = make(*b, {eval_batch, 32, 32, 3});
      b->augment(static_cast<const uint8_t*>(val_images.t.data()) + static_cast<size_t>(i) * image_bytes, xe.t, plain,
                 0);
      Tensor logits = model.forward(xe.t, Mode::kEval);
      correct += b->count_top_k(logits, Tensor(val_labels.t.i32() + i, {eval_batch}, DType::kI32), 1);
    }
    accuracy = static_cast<double>(correct) / static_cast<double>(n_val);
    std::printf("# epoch %lld: %.2f s training so far, test accuracy %.4f\n", static_cast<long long>(epoch + 1),
                train_seconds, accuracy);
  }
  std::printf("RESULT resnet9_cifar10_seconds_to_%.0f=%s epochs=%lld accuracy=%.4f train_seconds=%.2f device=%s\n",
              target * 100, accuracy >= target ? std::to_string(train_seconds).c_str() : "nan",
              static_cast<long long>(epoch), accuracy, train_seconds, no_spaces(device_description(0)).c_str());
  return 0;
}

// All-reduce over every visible GPU in this process (ncclCommInitAll); bus bandwidth as nccl-tests defines it.
int nccl(const Args& args) {
  if (!require_device()) return kNoDevice;
  const int n = device_count();
  const int64_t max_bytes = args.integer("max-bytes", int64_t{1} << 30), iters = args.integer("iters", 20);
  std::vector<ncclComm_t> raw(static_cast<size_t>(n));
  NCCL_CHECK(ncclCommInitAll(raw.data(), n, nullptr));
  std::vector<NcclComm> comms;
  for (ncclComm_t c : raw) comms.emplace_back(c);
  std::vector<Stream> streams;
  std::vector<DeviceMemory> buffers;
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    streams.push_back(make_stream());
    buffers.emplace_back(static_cast<size_t>(max_bytes));
  }
  auto all_reduce = [&](size_t bytes) {
    NCCL_CHECK(ncclGroupStart());
    for (int d = 0; d < n; ++d)
      NCCL_CHECK(ncclAllReduce(buffers[static_cast<size_t>(d)].get(), buffers[static_cast<size_t>(d)].get(),
                               bytes / sizeof(float), ncclFloat, ncclSum, comms[static_cast<size_t>(d)].get(),
                               streams[static_cast<size_t>(d)].get()));
    NCCL_CHECK(ncclGroupEnd());
  };
  auto wait_all = [&] {
    for (int d = 0; d < n; ++d) CUDA_CHECK(cudaStreamSynchronize(streams[static_cast<size_t>(d)].get()));
  };
  double busbw = 0;
  for (int64_t bytes = int64_t{1} << 20; bytes <= max_bytes; bytes *= 4) {
    for (int i = 0; i < 5; ++i) all_reduce(static_cast<size_t>(bytes));
    wait_all();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i) all_reduce(static_cast<size_t>(bytes));
    wait_all();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(iters);
    const double algbw = static_cast<double>(bytes) / s / 1e9;
    busbw = torus::metrics::bus_bandwidth(static_cast<double>(bytes), s, n) / 1e9;
    std::printf("# %lld bytes: %.1f us, algbw %.2f GB/s, busbw %.2f GB/s\n", static_cast<long long>(bytes), s * 1e6,
                algbw, busbw);
  }
  std::printf("RESULT nccl_allreduce_busbw_gbps=%.2f gpus=%d max_bytes=%lld%s\n", busbw, n,
              static_cast<long long>(max_bytes), n == 1 ? " note=one_gpu_moves_no_data" : "");
  return 0;
}

int bench_main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const Args args(argc, argv);
  if (mode == "check") return check();
  if (mode == "resnet50") return resnet50(args);
  if (mode == "resnet9") return resnet9(args);
  if (mode == "nccl") return nccl(args);
  throw InvalidArgument("mode: expected check, resnet50, resnet9 or nccl, got \"" + mode + "\"");
}

}  // namespace
}  // namespace torus::worker::cuda

int main(int argc, char** argv) {
  return torus::run_main("torus_gpu_bench", [&] { return torus::worker::cuda::bench_main(argc, argv); });
}

// torus-train-bench: training throughput (forward + backward + SGD update) of one ResNet on synthetic data,
// the number bench/train_throughput.sh compares with PyTorch.
//   torus-train-bench --arch resnet9 --widths 8,16,32,64 --in-channels 1 --image 28 --batch 128 --steps 30
// Prints a per-op profile (--profile; --profile-shapes splits it per layer geometry) and ends with `RESULT images_per_second=X`.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/profiling_backend.h"
#include "worker/train/step.h"

namespace torus::worker::train {
namespace {

struct BenchArgs {
  nn::ModelConfig model;
  int64_t steps = 30, warmup = 5;
  int threads = 0;
  bool profile = false;
  ProfileDetail detail = ProfileDetail::kPerOp;
};

template <class E>
E parse_choice(const std::string& flag, const std::string& value) {
  if (auto v = api::parse_enum<E>(value)) return *v;
  throw InvalidArgument("torus-train-bench: " + flag + ": expected one of " + api::enum_choices<E>() + ", got '" +
                        value + "'");
}

std::vector<int64_t> parse_widths(const std::string& text) {
  std::vector<int64_t> widths;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) widths.push_back(std::stoll(item));
  return widths;
}

BenchArgs parse(int argc, char** argv) {
  BenchArgs a;
  a.model.head_pool = PoolKind::kMax;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--profile" || flag == "--profile-shapes") {
      a.profile = true;
      if (flag == "--profile-shapes") a.detail = ProfileDetail::kPerShape;
      continue;
    }
    if (i + 1 >= argc) throw InvalidArgument("torus-train-bench: " + flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--arch")
      a.model.arch = parse_choice<api::Arch>(flag, v);
    else if (flag == "--widths")
      a.model.widths = parse_widths(v);
    else if (flag == "--stem")
      a.model.stem = parse_choice<api::Stem>(flag, v);
    else if (flag == "--pool")
      a.model.head_pool = v == "avg" ? PoolKind::kAvg : PoolKind::kMax;
    else if (flag == "--in-channels")
      a.model.in_channels = std::stoll(v);
    else if (flag == "--classes")
      a.model.num_classes = std::stoll(v);
    else if (flag == "--image")
      a.model.image_size = std::stoll(v);
    else if (flag == "--batch")
      a.model.batch_size = std::stoll(v);
    else if (flag == "--steps")
      a.steps = std::stoll(v);
    else if (flag == "--warmup")
      a.warmup = std::stoll(v);
    else if (flag == "--threads")
      a.threads = std::stoi(v);
    else
      throw InvalidArgument("torus-train-bench: unknown flag " + flag);
  }
  return a;
}

int run(int argc, char** argv) {
  BenchArgs a = parse(argc, argv);
  auto cpu = cpu::make_cpu_backend(a.threads);
  ProfilingBackend profiled(*cpu, a.detail);
  Backend& backend = a.profile ? static_cast<Backend&>(profiled) : *cpu;
  nn::Model model(backend, a.model);
  TrainStep step(model, optim::SgdConfig{}, 0.1f, nullptr);

  const int64_t n = a.model.batch_size, s = a.model.image_size, c = a.model.in_channels;
  std::vector<float> host_images(static_cast<size_t>(n * s * s * c));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : host_images) v = normal(rng);
  std::vector<int32_t> host_labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host_labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % a.model.num_classes);
  Buffer images = backend.allocate(host_images.size() * 4), labels = backend.allocate(host_labels.size() * 4);
  Tensor x = images.view({n, s, s, c}), y = labels.view({n}, DType::kI32);
  backend.upload(host_images.data(), x);
  backend.upload(host_labels.data(), y);

  for (int64_t i = 0; i < a.warmup; ++i) step.run(x, y, 0.01f);
  backend.synchronize();
  profiled.reset();
  const auto start = std::chrono::steady_clock::now();
  double loss = 0;
  for (int64_t i = 0; i < a.steps; ++i) loss = step.run(x, y, 0.01f);
  backend.synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double ips = static_cast<double>(a.steps * n) / seconds;
  std::printf(
      "torus %s widths=%zu params=%lld batch=%lld image=%lldx%lldx%lld threads=%d: %.1f img/s (%.2f ms/step, loss "
      "%.3f)\n",
      std::string(api::to_string(a.model.arch)).c_str(), a.model.widths.size(),
      static_cast<long long>(model.parameter_count()), static_cast<long long>(n), static_cast<long long>(s),
      static_cast<long long>(s), static_cast<long long>(c), backend.threads(), ips,
      1000.0 * seconds / static_cast<double>(a.steps), loss);
  if (a.profile)
    std::printf("per-op time over %lld steps:\n%s", static_cast<long long>(a.steps), profiled.report().c_str());
  std::printf("RESULT images_per_second=%.2f\n", ips);
  return 0;
}

}  // namespace
}  // namespace torus::worker::train

int main(int argc, char** argv) {
  return torus::run_main("torus-train-bench", [&] { return torus::worker::train::run(argc, argv); });
}

// torus_data_bench: how fast the prefetching loader delivers Fashion-MNIST training epochs (bench/data_loader.sh).
//   torus_data_bench [--threads N] [--epochs N] [--batch N] [--augment none|flip|flip+crop] [--dir DIR]
// Prints one line per epoch and a summary: "torus threads=2 batch=256 augment=flip img_per_s=... epoch_s=...".
//   torus_data_bench --jpegs N [--threads N]
// Writes N ImageNet-like JPEGs (about 500x375, 10 classes) to a temp folder and times a training epoch
// (random-resized-crop to 224 + flip) and a rectangular validation pass (shorter side 224):
// "torus-jpeg threads=2 train_img_per_s=... val_img_per_s=...".
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/data/idx.h"
#include "worker/data/jpeg_folder.h"
#include "worker/data/loader.h"

namespace {

using namespace torus::worker::data;
using torus::worker::Mode;

struct Args {
  int threads = 2;
  int epochs = 3;
  int batch = 256;
  std::string augment = "flip";
  std::string dir = kFashionMnistDir;
  int jpegs = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw torus::InvalidArgument(flag + ": missing value");
    const std::string value = argv[++i];
    if (flag == "--threads") {
      a.threads = std::stoi(value);
    } else if (flag == "--epochs") {
      a.epochs = std::stoi(value);
    } else if (flag == "--batch") {
      a.batch = std::stoi(value);
    } else if (flag == "--augment") {
      a.augment = value;
    } else if (flag == "--jpegs") {
      a.jpegs = std::stoi(value);
    } else if (flag == "--dir") {
      a.dir = value;
    } else {
      throw torus::InvalidArgument("unknown flag " + flag);
    }
  }
  if (a.augment != "none" && a.augment != "flip" && a.augment != "flip+crop") {
    throw torus::InvalidArgument("--augment: expected none, flip or flip+crop, got " + a.augment);
  }
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// CPU seconds of the whole process (all threads): on a shared machine, images per CPU-second is the stable figure.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Rate {
  double per_s;
  double per_cpu_s;
};

// Smooth colour fields plus noise: compresses like a photo (tens of KB), unlike flat colour or pure noise.
std::vector<uint8_t> photo_like(int h, int w, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  const float fx = 1 + 4 * u(rng), fy = 1 + 4 * u(rng), phase = 6 * u(rng);
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) {
        const float v = 128 + 90 * std::sin(fx * x / w * 6.28f + fy * y / h * 6.28f + phase + c) + 20 * (u(rng) - 0.5f);
        rgb[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
      }
    }
  }
  return rgb;
}

void write_jpeg_folder(const std::filesystem::path& root, int count) {
  std::mt19937 rng(7);
  const int sizes[][2] = {{375, 500}, {500, 375}, {400, 400}, {333, 500}, {480, 640}};
  for (const char* split : {"train", "val"}) {
    for (int i = 0; i < count; ++i) {
      const auto dir = root / split / ("class" + std::to_string(i % 10));
      std::filesystem::create_directories(dir);
      const auto* s = sizes[i % 5];
      const auto bytes = encode_jpeg(photo_like(s[0], s[1], rng).data(), s[0], s[1], 90);
      FILE* f = std::fopen((dir / (std::to_string(i) + ".jpg")).c_str(), "wb");
      if (!f) torus::throw_errno("bench: cannot write a JPEG");
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
  }
}

Rate time_epoch(Loader& loader) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  loader.start_epoch(0);
  int64_t images = 0;
  while (auto b = loader.next()) images += b->n;
  const auto n = static_cast<double>(images);
  return {n / seconds_since(t0), n / (process_cpu_seconds() - cpu0)};
}

int run_jpegs(const Args& a) {
  const auto root = std::filesystem::temp_directory_path() / ("torus-jpeg-bench-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);  // a leftover of an earlier run with this pid would add its images
  write_jpeg_folder(root, a.jpegs);
  auto train = JpegFolder::open(root.string(), Split::kTrain);
  auto val = JpegFolder::open(root.string(), Split::kVal);
  LoaderConfig tc{.mode = Mode::kTrain,
                  .batch_size = 64,
                  .image_size = {224, 224},
                  .seed = 1,
                  .threads = a.threads,
                  .prefetch = 4};
  tc.transform.train_crop = TrainCrop::kRandomResizedCrop;
  tc.transform.flip = Flip::kHorizontal;
  tc.transform.mean = {0.485f, 0.456f, 0.406f};
  tc.transform.std = {0.229f, 0.224f, 0.225f};
  LoaderConfig vc = tc;
  vc.mode = Mode::kEval;
  vc.rectangular = Rectangular::kOn;
  vc.transform.eval_crop_fraction = 0.875f;
  Loader train_loader(train, tc);
  Loader val_loader(val, vc);
  const Rate train_rate = time_epoch(train_loader);
  const Rate val_rate = time_epoch(val_loader);
  std::filesystem::remove_all(root);
  std::printf(
      "torus-jpeg threads=%d images=%d train_img_per_s=%.0f train_img_per_cpu_s=%.0f val_img_per_s=%.0f "
      "val_img_per_cpu_s=%.0f\n",
      a.threads, a.jpegs, train_rate.per_s, train_rate.per_cpu_s, val_rate.per_s, val_rate.per_cpu_s);
  return 0;
}

int run(const Args& a) {
  if (a.jpegs > 0) return run_jpegs(a);
  auto t0 = std::chrono::steady_clock::now();
  auto train = load_fashion_mnist(a.dir, Split::kTrain);
  std::printf("# load (gunzip + validate) %.3f s, %lld images\n", seconds_since(t0),
              static_cast<long long>(train->size()));
  LoaderConfig cfg{.mode = Mode::kTrain, .batch_size = a.batch, .seed = 1, .threads = a.threads, .prefetch = 4};
  cfg.transform.mean = {0.2860f};
  cfg.transform.std = {0.3530f};
  if (a.augment != "none") cfg.transform.flip = Flip::kHorizontal;
  if (a.augment == "flip+crop") cfg.transform.train_crop = TrainCrop::kPadCrop;
  Loader loader(train, cfg);
  double total = 0, checksum = 0;
  const double cpu0 = process_cpu_seconds();
  int64_t images = 0;
  for (int e = 0; e < a.epochs; ++e) {
    t0 = std::chrono::steady_clock::now();
    loader.start_epoch(e);
    while (auto b = loader.next()) {
      checksum += b->images[0];  // touch the batch like a consumer would
      images += b->n;
    }
    const double s = seconds_since(t0);
    total += s;
    std::printf("# epoch %d: %.3f s\n", e, s);
  }
  const double cpu = process_cpu_seconds() - cpu0;
  std::printf("torus threads=%d batch=%d augment=%s img_per_s=%.0f img_per_cpu_s=%.0f epoch_s=%.3f checksum=%.3f\n",
              a.threads, a.batch, a.augment.c_str(), static_cast<double>(images) / total,
              static_cast<double>(images) / cpu, total / a.epochs, checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("torus_data_bench", [&] { return run(parse(argc, argv)); });
}

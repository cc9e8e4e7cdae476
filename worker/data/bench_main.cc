// torus_data_bench: how fast the prefetching loader delivers Fashion-MNIST training epochs (bench/data_loader.sh).
//   torus_data_bench [--threads N] [--epochs N] [--batch N] [--augment none|flip|flip+crop] [--dir DIR]
// Prints one line per epoch and a summary: "torus threads=2 batch=256 augment=flip img_per_s=... epoch_s=...".
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "worker/data/idx.h"
#include "worker/data/loader.h"

namespace {

using namespace torus::worker::data;

struct Args {
  int threads = 2;
  int epochs = 3;
  int batch = 256;
  std::string augment = "flip";
  std::string dir = kFashionMnistDir;
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

int run(const Args& a) {
  auto t0 = std::chrono::steady_clock::now();
  auto train = load_fashion_mnist(a.dir, Split::Train);
  std::printf("# load (gunzip + validate) %.3f s, %lld images\n", seconds_since(t0),
              static_cast<long long>(train->size()));
  LoaderConfig cfg{.phase = Phase::Train, .batch_size = a.batch, .seed = 1, .threads = a.threads, .prefetch = 4};
  cfg.transform.mean = {0.2860f};
  cfg.transform.std = {0.3530f};
  if (a.augment != "none") cfg.transform.flip = Flip::Horizontal;
  if (a.augment == "flip+crop") cfg.transform.train_crop = TrainCrop::PadCrop;
  Loader loader(train, cfg);
  double total = 0, checksum = 0;
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
  std::printf("torus threads=%d batch=%d augment=%s img_per_s=%.0f epoch_s=%.3f checksum=%.3f\n", a.threads, a.batch,
              a.augment.c_str(), static_cast<double>(images) / total, total / a.epochs, checksum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("torus_data_bench", [&] { return run(parse(argc, argv)); });
}

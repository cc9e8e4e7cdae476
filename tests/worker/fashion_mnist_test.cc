// End to end, one process: the anchors' Fashion-MNIST recipe must reach 92% top-1 within 5 epochs.
// Labelled `slow`; the time is logged, never asserted.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/log/log.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

TEST(FashionMnist, ResNet9Reaches92PercentWithin5Epochs) {
  if (!std::filesystem::exists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed at " << kFashionMnist;
  // anchors.md "Measured on a machine like ours": widths 8-16-32-64, batch 256, Nesterov 0.9, peak LR 0.2 after
  // 20% linear warm-up then linear decay to 0, wd 5e-4 on conv/linear weights, label smoothing 0.1, flip only,
  // global max pool, 4 epochs (PyTorch: 92.67% on 2 threads). The run may go to 5 epochs; it stops at 92%.
  TrainConfig c;
  c.model.arch = api::Arch::kResNet9;
  c.model.widths = {8, 16, 32, 64};
  c.model.num_classes = 10;
  c.model.head_pool = PoolKind::kMax;
  c.data.dataset = api::Dataset::kFashionMnist;
  c.data.path = kFashionMnist;
  c.data.transform.flip = data::Flip::kHorizontal;
  c.data.loader_threads = 1;
  c.epochs = 5;
  c.phases = {{.from_epoch = 0, .to_epoch = static_cast<int32_t>(c.epochs), .image_size = 28, .per_rank_batch = 256}};
  c.lr_points = optim::LrSchedule::warmup_then_linear_decay(0.2, 0.2, 4.0).points();
  c.sgd = {0.9f, math::Nesterov::kOn, 5e-4f};
  c.label_smoothing = 0.1f;
  c.target_accuracy = 0.92;
  c.seed = 0;
  c.eval_batch_size = 500;
  c.log_every_steps = 100;
  auto backend = cpu::make_cpu_backend();
  LocalCollectives world;
  Trainer trainer(*backend, c, load_datasets(c.data, c.seed), world);
  const RunResult r = trainer.run();
  TLOG(Info) << "Fashion-MNIST: top-1 " << r.last_eval.top1 * 100 << "% after " << r.epochs_completed << " epochs, "
             << r.seconds << " s on " << backend->threads() << " threads"
             << (r.reached_target ? ", 92% reached at " + std::to_string(r.seconds_to_target) + " s" : "");
  EXPECT_TRUE(r.reached_target) << "top-1 " << r.last_eval.top1;
  EXPECT_GE(r.last_eval.top1, 0.92);
  EXPECT_EQ(r.last_eval.samples, 10000);
}

}  // namespace
}  // namespace torus::worker::train

// The training loop on a backend whose memory is not host-addressable (MemorySpace::kDevice), on the CPU: a wrapper
// over the CPU backend claims device memory and keeps every buffer it hands out, and the collectives check that no
// span given to them lies inside one. Two ranks (threads) must train exactly like two ranks on the plain CPU backend:
// parameters broadcast, BN statistics averaged and a checkpoint restored through the host copies (download / upload),
// with the weight shadows invalidated after every parameter write the backend did not make.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.h"
#include "tests/worker/pretend_device_backend.h"
#include "tests/worker/thread_collectives.h"
#include "tests/worker/two_rank_training.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using torus::worker::testing::PretendDeviceBackend;
using testing::Rendezvous;
using testing::ThreadCollectives;

// Host collectives that count every span they get which lies in backend memory (the trainer must stage those).
class HostOnlyCollectives final : public Collectives {
 public:
  HostOnlyCollectives(Collectives& inner, const PretendDeviceBackend* backend) : inner_(inner), backend_(backend) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce_sum(std::span<double> v) override {
    check(v.data(), v.size_bytes());
    inner_.all_reduce_sum(v);
  }
  void all_reduce_sum(std::span<float> v) override {
    check(v.data(), v.size_bytes());
    inner_.all_reduce_sum(v);
  }
  void broadcast(std::span<float> v, int root) override {
    check(v.data(), v.size_bytes());
    inner_.broadcast(v, root);
  }
  void barrier() override { inner_.barrier(); }
  int device_spans = 0;

 private:
  void check(const void* p, size_t bytes) {
    if (backend_ != nullptr && bytes > 0 && backend_->owns(p, bytes)) ++device_spans;
  }
  Collectives& inner_;
  const PretendDeviceBackend* backend_;
};

// The gradient path of device memory belongs to a device collective (NCCL on GPUs); here the pretend device is host
// memory, so the test's averaging (testing::AveragingSync) reads the arena directly, over its own rendezvous.
using testing::AveragingSync;

TrainConfig config() { return testing::two_rank_config(); }

enum class Memory { kHost, kPretendDevice };

struct Outcome : testing::TrainedRank {
  int device_spans = 0, uploads = 0, downloads = 0, invalidations = 0;
};

std::array<Outcome, 2> run_two_ranks(Memory memory, const TrainConfig& c, const Datasets& data, int64_t max_steps,
                                     bool resume) {
  Rendezvous loop_rendezvous(2), grad_rendezvous(2);
  return testing::on_two_ranks<Outcome>([&](int rank, Outcome& o) {
    std::unique_ptr<Backend> backend = cpu::make_cpu_backend(1);
    PretendDeviceBackend* device = nullptr;
    if (memory == Memory::kPretendDevice) {
      auto d = std::make_unique<PretendDeviceBackend>();
      device = d.get();
      backend = std::move(d);
    }
    ThreadCollectives loop_coll(loop_rendezvous, rank, 2), grad_coll(grad_rendezvous, rank, 2);
    HostOnlyCollectives coll(loop_coll, device);
    auto factory = [&](const Arena& grads) { return std::make_unique<AveragingSync>(grad_coll, grads); };
    Trainer t(*backend, c, data, coll, factory);
    testing::train_and_record(t, resume, max_steps, o);
    o.device_spans = coll.device_spans;
    if (device != nullptr) {
      o.uploads = device->uploads();
      o.downloads = device->downloads();
      o.invalidations = device->invalidations();
    }
  });
}

TEST(DeviceMemory, TwoRanksStageArenaCollectivesThroughTheHostAndTrainLikeHostMemory) {
  const TrainConfig c = config();
  const Datasets data = load_datasets(c.data, c.seed);
  const auto host = run_two_ranks(Memory::kHost, c, data, 0, false);
  const auto device = run_two_ranks(Memory::kPretendDevice, c, data, 0, false);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(host[r].error, "") << "rank " << r;
    ASSERT_EQ(device[r].error, "") << "rank " << r;
    EXPECT_EQ(device[r].device_spans, 0) << "rank " << r << " handed backend memory to a host collective";
    // At least: parameter broadcast (1) and BN averaging after each of 2 epochs (2), each a download and an upload.
    EXPECT_GE(device[r].downloads, 3) << "rank " << r;
    EXPECT_GE(device[r].invalidations, 1) << "rank " << r << ": weight shadows not invalidated after the broadcast";
  }
  EXPECT_EQ(device[0].result.steps, 16);
  EXPECT_EQ(device[0].params, device[1].params);
  EXPECT_EQ(device[0].stats, device[1].stats);  // averaged before evaluation, through host copies
  // Staging copies values exactly: the same run as on host memory, bit for bit.
  EXPECT_EQ(device[0].params, host[0].params);
  EXPECT_EQ(device[0].stats, host[0].stats);
  EXPECT_DOUBLE_EQ(device[0].result.last_eval.loss, host[0].result.last_eval.loss);
  EXPECT_EQ(device[0].result.last_eval.samples, 100);
}

TEST(DeviceMemory, RestoreBroadcastsRankZerosCheckpointThroughTheHost) {
  TrainConfig c = config();
  const Datasets data = load_datasets(c.data, c.seed);
  const auto straight = run_two_ranks(Memory::kHost, c, data, 0, false);
  ASSERT_EQ(straight[0].error, "");
  const test::TempDir tmp("torus-device-memory");
  c.checkpoint.dir = tmp.str();
  c.checkpoint.every_steps = 5;
  c.checkpoint.every_epochs = 0;
  const auto first = run_two_ranks(Memory::kPretendDevice, c, data, 5, false);  // rank 0 writes ckpt-5
  ASSERT_EQ(first[0].error, "");
  ASSERT_EQ(first[1].error, "");
  const auto second = run_two_ranks(Memory::kPretendDevice, c, data, 0, true);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(second[r].error, "") << "rank " << r;
    EXPECT_TRUE(second[r].resumed) << "rank " << r;
    EXPECT_EQ(second[r].device_spans, 0) << "rank " << r;
    EXPECT_GE(second[r].invalidations, 2) << "rank " << r << ": initial and restore broadcasts";
  }
  EXPECT_EQ(second[0].params, second[1].params);
  EXPECT_EQ(second[1].params, straight[0].params);  // rank 1 read nothing: everything came through the broadcasts
}

}  // namespace
}  // namespace torus::worker::train

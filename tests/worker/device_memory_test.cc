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
#include "tests/worker/thread_collectives.h"
#include "tests/worker/two_rank_training.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/train/trainer.h"

namespace torus::worker::train {
namespace {

using testing::Rendezvous;
using testing::ThreadCollectives;

// The CPU backend, pretending its memory is device memory. Buffers stay alive until the backend dies, so an address
// inside one is never reused by host memory and the collectives' check cannot be fooled.
class PretendDeviceBackend final : public Backend {
 public:
  PretendDeviceBackend() : inner_(cpu::make_cpu_backend(1)) {}
  // Whether [p, p + bytes) overlaps memory this backend handed out.
  bool owns(const void* p, size_t bytes) const {
    std::lock_guard lock(mu_);
    const auto* b = static_cast<const std::byte*>(p);
    for (const Buffer& buf : kept_) {
      const auto* begin = static_cast<const std::byte*>(buf.data());
      if (b < begin + buf.bytes() && begin < b + bytes) return true;
    }
    return false;
  }
  int uploads() const { return uploads_; }
  int downloads() const { return downloads_; }
  int invalidations() const { return invalidations_; }

  std::string name() const override { return "pretend-device-" + inner_->name(); }
  int threads() const override { return inner_->threads(); }
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  Buffer allocate(size_t bytes) override {
    Buffer real = inner_->allocate(bytes);
    Buffer view(real.data(), real.bytes(), nullptr);  // not owning: the real one is kept
    std::lock_guard lock(mu_);
    kept_.push_back(std::move(real));
    return view;
  }
  void upload(const void* host, Tensor dst) override {
    ++uploads_;
    inner_->upload(host, dst);
  }
  void download(Tensor src, void* host) override {
    ++downloads_;
    inner_->download(src, host);
  }
  void copy(Tensor src, Tensor dst) override { inner_->copy(src, dst); }
  void fill(Tensor t, float value) override { inner_->fill(t, value); }
  void synchronize() override { inner_->synchronize(); }
  void invalidate_weight_shadows() override { ++invalidations_; }

  size_t conv_weight_elements(const ConvGeometry& g) override { return inner_->conv_weight_elements(g); }
  void conv_weight_import(const ConvGeometry& g, const float* host, Tensor native) override {
    inner_->conv_weight_import(g, host, native);
  }
  void conv_weight_export(const ConvGeometry& g, Tensor native, float* host) override {
    inner_->conv_weight_export(g, native, host);
  }
  void conv_forward(const ConvGeometry& g, Tensor x, Tensor w, Tensor y) override { inner_->conv_forward(g, x, w, y); }
  void conv_backward_data(const ConvGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    inner_->conv_backward_data(g, dy, w, dx);
  }
  void conv_backward_weights(const ConvGeometry& g, Tensor x, Tensor dy, Tensor dw) override {
    inner_->conv_backward_weights(g, x, dy, dw);
  }
  size_t norm_workspace_bytes(const NormGeometry& g) override { return inner_->norm_workspace_bytes(g); }
  void norm_forward_training(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor y, Tensor save_mean,
                             Tensor save_var, Tensor running_mean, Tensor running_var, float momentum,
                             Tensor workspace) override {
    inner_->norm_forward_training(g, x, gamma, beta, y, save_mean, save_var, running_mean, running_var, momentum,
                                  workspace);
  }
  void norm_forward_inference(const NormGeometry& g, Tensor x, Tensor gamma, Tensor beta, Tensor mean, Tensor var,
                              Tensor y) override {
    inner_->norm_forward_inference(g, x, gamma, beta, mean, var, y);
  }
  void norm_backward(const NormGeometry& g, Tensor x, Tensor dy, Tensor gamma, Tensor beta, Tensor save_mean,
                     Tensor save_var, Tensor workspace, Tensor dx, Tensor dgamma, Tensor dbeta) override {
    inner_->norm_backward(g, x, dy, gamma, beta, save_mean, save_var, workspace, dx, dgamma, dbeta);
  }
  void relu_forward(Tensor x, Tensor y) override { inner_->relu_forward(x, y); }
  void relu_backward(Tensor y, Tensor dy, Tensor dx) override { inner_->relu_backward(y, dy, dx); }
  void add(Tensor a, Tensor b, Tensor y, Activation act) override { inner_->add(a, b, y, act); }
  size_t pool_workspace_bytes(const PoolGeometry& g) override { return inner_->pool_workspace_bytes(g); }
  void pool_forward(const PoolGeometry& g, Tensor x, Tensor y, Tensor ws) override {
    inner_->pool_forward(g, x, y, ws);
  }
  void pool_backward(const PoolGeometry& g, Tensor dy, Tensor ws, Tensor dx) override {
    inner_->pool_backward(g, dy, ws, dx);
  }
  void linear_forward(const LinearGeometry& g, Tensor x, Tensor w, Tensor b, Tensor y) override {
    inner_->linear_forward(g, x, w, b, y);
  }
  void linear_backward_data(const LinearGeometry& g, Tensor dy, Tensor w, Tensor dx) override {
    inner_->linear_backward_data(g, dy, w, dx);
  }
  void linear_backward_weights(const LinearGeometry& g, Tensor x, Tensor dy, Tensor dw, Tensor db) override {
    inner_->linear_backward_weights(g, x, dy, dw, db);
  }
  double softmax_cross_entropy(Tensor logits, Tensor labels, float smoothing, Tensor dlogits) override {
    return inner_->softmax_cross_entropy(logits, labels, smoothing, dlogits);
  }
  int64_t count_top_k(Tensor logits, Tensor labels, int k) override { return inner_->count_top_k(logits, labels, k); }
  void sgd_update(Tensor param, Tensor grad, Tensor momentum, const SgdHyper& h) override {
    inner_->sgd_update(param, grad, momentum, h);
  }
  bool supports_activations(DType dtype) const override { return inner_->supports_activations(dtype); }
  void enable_loss_scaling(const LossScaleConfig& config) override { inner_->enable_loss_scaling(config); }
  void unscale_gradients(Tensor grads) override { inner_->unscale_gradients(grads); }
  void update_loss_scale() override { inner_->update_loss_scale(); }
  LossScaleState loss_scale_state() override { return inner_->loss_scale_state(); }
  void set_loss_scale_state(const LossScaleState& state) override { inner_->set_loss_scale_state(state); }

 private:
  std::unique_ptr<Backend> inner_;
  mutable std::mutex mu_;
  std::vector<Buffer> kept_;
  std::atomic<int> uploads_{0}, downloads_{0}, invalidations_{0};
};

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

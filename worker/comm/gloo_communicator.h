#pragma once
// The CPU backend: Gloo over TCP (Debian libgloo-dev). Gloo ships no TCP store, so its rendezvous runs over ours
// (GlooStoreAdapter). All-reduce, broadcast and barrier are Gloo's own algorithms; the in-place reduce-scatter and
// all-gather with uneven chunks are rings written here over Gloo's unbound buffers (Gloo's versions want equal or
// separately allocated chunks).
#include <memory>
#include <string>

#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace torus::comm {

struct GlooOptions {
  // Address the TCP device binds and advertises; must be reachable by the other ranks.
  std::string bind_host = "127.0.0.1";
  milliseconds timeout{30000};
  // The TCP device (listener + event loop) shared by a rank's communicators; created from bind_host when null.
  // One per rank, never shared between ranks (ranks as threads in tests each get their own, as processes do).
  std::shared_ptr<gloo::transport::Device> device;
};

// The agreed membership of a split: every rank publishes (color, key) under "<tag>/<rank>" and reads everyone's.
// Returns the global ranks of this rank's color in (key, rank) order; empty for a negative color.
std::vector<int> exchange_split(Store& store, const std::string& tag, int rank, int size, int color, int key,
                                milliseconds timeout);

class GlooCommunicator : public Communicator {
 public:
  // Connects a full mesh among `size` ranks through `store` (already prefixed for this communicator).
  GlooCommunicator(int rank, int size, std::shared_ptr<Store> store, const GlooOptions& options);
  ~GlooCommunicator() override;

  void all_reduce_now(BufferView buf, ReduceOp op) override;
  void reduce_scatter_now(BufferView buf, ReduceOp op) override;
  void all_gather_now(BufferView buf) override;
  void broadcast_now(BufferView buf, int root) override;
  void barrier_now() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::string backend() const override { return "gloo"; }
  void abort() noexcept override;

 private:
  template <typename Fn>
  void guarded(const char* what, Fn&& fn);
  uint32_t next_tag() { return tag_++; }

  std::shared_ptr<Store> store_;
  GlooOptions options_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<char> scratch_;  // receive buffer of the reduce-scatter ring
  uint32_t tag_ = 1;
  int splits_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace torus::comm

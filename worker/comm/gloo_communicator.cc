#include "worker/comm/gloo_communicator.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <sstream>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::comm {

namespace {

// Gloo's rendezvous over our store: connectFullMesh publishes each rank's addresses and waits for the others'.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(comm::Store& store, milliseconds timeout) : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key, timeout_); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> missing = store_.wait(keys, timeout);
    if (missing.empty()) return;
    std::string names;
    for (const auto& k : missing) names += (names.empty() ? "" : ", ") + k;
    throw Timeout("rendezvous: ranks " + names + " never published their addresses within " +
                  std::to_string(timeout.count()) + " ms");
  }

 private:
  comm::Store& store_;
  milliseconds timeout_;
};

gloo::AllreduceOptions::Func reduce_function(DType t, ReduceOp op) {
  return [t, op](void* out, const void* a, const void* b, size_t n) { reduce_into(t, op, out, a, b, n); };
}

template <typename T>
void set_allreduce_buffer(gloo::AllreduceOptions& opts, BufferView buf) {
  opts.setOutput(static_cast<T*>(buf.data), buf.count);
}

}  // namespace

std::vector<int> exchange_split(Store& store, const std::string& tag, int rank, int size, int color, int key,
                                milliseconds timeout) {
  store.set(tag + "/" + std::to_string(rank), to_bytes(std::to_string(color) + " " + std::to_string(key)));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(tag + "/" + std::to_string(r));
  std::vector<std::string> missing = store.wait(keys, timeout);
  if (!missing.empty())
    throw Timeout("split " + tag + ": " + std::to_string(missing.size()) + " ranks never joined within " +
                  std::to_string(timeout.count()) + " ms (first missing key: " + missing.front() + ")");
  if (color < 0) return {};
  std::vector<std::pair<int, int>> members;  // (key, rank)
  for (int r = 0; r < size; ++r) {
    std::istringstream in(to_string(store.get(keys[static_cast<size_t>(r)], timeout)));
    int c = 0;
    int k = 0;
    in >> c >> k;
    if (c == color) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> ranks;
  for (const auto& m : members) ranks.push_back(m.second);
  return ranks;
}

GlooCommunicator::GlooCommunicator(int rank, int size, std::shared_ptr<Store> store, const GlooOptions& options)
    : Communicator(rank, size, options.timeout), store_(std::move(store)), options_(options) {
  if (!options_.device) {
    gloo::transport::tcp::attr attr;
    attr.hostname = options_.bind_host;
    options_.device = gloo::transport::tcp::CreateDevice(attr);
  }
  device_ = options_.device;
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options_.timeout);
  GlooStoreAdapter adapter(*store_, options_.timeout);
  guarded("connect", [&] { context->connectFullMesh(adapter, device_); });
  context_ = context;
  // A rank can finish connecting before its peers have: make construction complete everywhere, so a communicator
  // that is dropped unused never fails a peer's handshake with "connection closed".
  barrier_now();
}

GlooCommunicator::~GlooCommunicator() { stop_thread(); }

void GlooCommunicator::abort() noexcept {
  // Gloo 0.5 cannot interrupt a transfer from another thread safely; its own context timeout (equal to ours) ends
  // the stuck call, and every later call fails fast.
  aborted_.store(true);
}

template <typename Fn>
void GlooCommunicator::guarded(const char* what, Fn&& fn) {
  if (aborted_.load()) throw Error(std::string("gloo ") + what + ": communicator was aborted after a timeout");
  try {
    fn();
  } catch (const ::gloo::IoException& e) {
    const std::string msg = e.what();
    const std::string text = std::string("gloo ") + what + " (rank " + std::to_string(rank()) + " of " +
                             std::to_string(size()) + "): " + msg;
    if (msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos) throw Timeout(text);
    throw SystemError(text + " (a peer died or closed its connection)");
  } catch (const ::gloo::Exception& e) {
    throw Error(std::string("gloo ") + what + ": " + e.what());
  }
}

void GlooCommunicator::all_reduce_now(BufferView buf, ReduceOp op) {
  if (buf.count == 0 || size() == 1) return;
  guarded("all_reduce", [&] {
    gloo::AllreduceOptions opts(context_);
    switch (buf.dtype) {
      case DType::kF32:
        set_allreduce_buffer<float>(opts, buf);
        break;
      case DType::kF64:
        set_allreduce_buffer<double>(opts, buf);
        break;
      case DType::kI32:
        set_allreduce_buffer<int32_t>(opts, buf);
        break;
      case DType::kI64:
        set_allreduce_buffer<int64_t>(opts, buf);
        break;
      case DType::kF16:
      case DType::kBF16:
        set_allreduce_buffer<uint16_t>(opts, buf);
        break;
    }
    opts.setReduceFunction(reduce_function(buf.dtype, op));
    opts.setTag(next_tag());
    opts.setTimeout(options_.timeout);
    gloo::allreduce(opts);
  });
}

void GlooCommunicator::reduce_scatter_now(BufferView buf, ReduceOp op) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  guarded("reduce_scatter", [&] {
    // Ring: at step s rank r sends chunk (r-s-1) to r+1 and adds chunk (r-s-2) from r-1; after n-1 steps chunk r
    // holds the full reduction.
    const int r = rank();
    const int right = (r + 1) % n;
    const int left = (r + n - 1) % n;
    const size_t elem = dtype_size(buf.dtype);
    scratch_.resize(chunk_range(buf.count, n, 0).size() * elem);
    auto data = context_->createUnboundBuffer(buf.data, buf.bytes());
    auto tmp = context_->createUnboundBuffer(scratch_.data(), scratch_.size());
    const uint64_t slot = static_cast<uint64_t>(context_->nextSlot());
    for (int s = 0; s < n - 1; ++s) {
      const Range out = chunk_range(buf.count, n, ((r - s - 1) % n + n) % n);
      const Range in = chunk_range(buf.count, n, ((r - s - 2) % n + 2 * n) % n);
      if (out.size() > 0) data->send(right, slot, out.begin * elem, out.size() * elem);
      if (in.size() > 0) tmp->recv(left, slot, 0, in.size() * elem);
      if (in.size() > 0 && !tmp->waitRecv(options_.timeout))
        throw Timeout("reduce_scatter: no data from rank " + std::to_string(left));
      if (out.size() > 0 && !data->waitSend(options_.timeout))
        throw Timeout("reduce_scatter: rank " + std::to_string(right) + " did not take our data");
      reduce_into(buf.dtype, op, buf.at(in.begin), buf.at(in.begin), scratch_.data(), in.size());
    }
  });
}

void GlooCommunicator::all_gather_now(BufferView buf) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  guarded("all_gather", [&] {
    // Ring: at step s rank r forwards chunk (r-s) to r+1 and receives chunk (r-s-1) from r-1 in place.
    const int r = rank();
    const int right = (r + 1) % n;
    const int left = (r + n - 1) % n;
    const size_t elem = dtype_size(buf.dtype);
    auto send_buf = context_->createUnboundBuffer(buf.data, buf.bytes());
    auto recv_buf = context_->createUnboundBuffer(buf.data, buf.bytes());
    const uint64_t slot = static_cast<uint64_t>(context_->nextSlot());
    for (int s = 0; s < n - 1; ++s) {
      const Range out = chunk_range(buf.count, n, ((r - s) % n + n) % n);
      const Range in = chunk_range(buf.count, n, ((r - s - 1) % n + n) % n);
      if (out.size() > 0) send_buf->send(right, slot, out.begin * elem, out.size() * elem);
      if (in.size() > 0) recv_buf->recv(left, slot, in.begin * elem, in.size() * elem);
      if (in.size() > 0 && !recv_buf->waitRecv(options_.timeout))
        throw Timeout("all_gather: no data from rank " + std::to_string(left));
      if (out.size() > 0 && !send_buf->waitSend(options_.timeout))
        throw Timeout("all_gather: rank " + std::to_string(right) + " did not take our data");
    }
  });
}

void GlooCommunicator::broadcast_now(BufferView buf, int root) {
  if (buf.count == 0 || size() == 1) return;
  guarded("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    auto* bytes = static_cast<uint8_t*>(buf.data);
    if (rank() == root) opts.setInput(bytes, buf.bytes());
    opts.setOutput(bytes, buf.bytes());
    opts.setRoot(root);
    opts.setTag(next_tag());
    opts.setTimeout(options_.timeout);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::barrier_now() {
  if (size() == 1) return;
  guarded("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(next_tag());
    opts.setTimeout(options_.timeout);
    gloo::barrier(opts);
  });
}

std::unique_ptr<Communicator> GlooCommunicator::split(int color, int key) {
  const std::string tag = "split" + std::to_string(splits_++);
  std::vector<int> members = exchange_split(*store_, tag, rank(), size(), color, key, options_.timeout);
  if (members.empty()) return nullptr;
  const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
  auto sub_store = std::make_shared<PrefixStore>(tag + "/c" + std::to_string(color), store_);
  return std::make_unique<GlooCommunicator>(new_rank, static_cast<int>(members.size()), sub_store, options_);
}

}  // namespace torus::comm

#pragma once
// The rendezvous key-value store: served over TCP by rank 0 (a thread in its process), reached by every rank at
// MASTER_ADDR:MASTER_PORT. Clients authenticate with an HMAC-SHA256 challenge-response over a per-job secret;
// every key a job uses lives under "<job>/<attempt>/" (PrefixStore) so a restarted gang never reads stale keys.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "worker/comm/socket.h"

namespace torus::comm {

using Bytes = std::vector<char>;
using std::chrono::milliseconds;

Bytes to_bytes(const std::string& s);
std::string to_string(const Bytes& b);

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until the key exists; Timeout naming the key after `timeout`.
  virtual Bytes get(const std::string& key, milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer under key (absent = 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Blocks until every key exists; returns the keys still missing when `timeout` passed (empty on success).
  virtual std::vector<std::string> wait(const std::vector<std::string>& keys, milliseconds timeout) = 0;
  // Which of `keys` exist now, without waiting.
  virtual std::vector<bool> check(const std::vector<std::string>& keys) = 0;
  virtual bool erase(const std::string& key) = 0;
};

// Namespaces every key under "<prefix>/".
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base) : prefix_(std::move(prefix)), base_(std::move(base)) {}
  void set(const std::string& key, const Bytes& value) override { base_->set(join(key), value); }
  Bytes get(const std::string& key, milliseconds timeout) override { return base_->get(join(key), timeout); }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(join(key), delta); }
  std::vector<std::string> wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  std::vector<bool> check(const std::vector<std::string>& keys) override;
  bool erase(const std::string& key) override { return base_->erase(join(key)); }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

// The server: one accept thread plus one thread per connection (a gang has tens of ranks, not thousands).
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port, std::string secret);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  // Connections refused for a wrong secret so far (tests and metrics).
  int refused_clients() const { return refused_.load(); }
  // Connections admitted so far.
  int admitted_clients() const { return admitted_.load(); }

 private:
  struct State;
  void accept_loop();
  void serve(Fd conn);

  std::string secret_;
  Fd listener_;
  Fd wake_read_;
  Fd wake_write_;
  int port_ = 0;
  std::atomic<int> refused_{0};
  std::atomic<int> admitted_{0};
  std::shared_ptr<State> state_;
  std::thread acceptor_;
};

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string secret;
  // How long to keep retrying the first connection while rank 0 comes up.
  milliseconds connect_timeout{30000};
  // How long a later connection (the pool grows when threads call at once, and after a lost one) keeps retrying:
  // rank 0 answered once, so one that stays unreachable this long has gone (a rank leaving after it must not wait
  // out connect_timeout).
  milliseconds reconnect_timeout{10000};
  // Default for requests that do not carry their own timeout.
  milliseconds request_timeout{30000};
};

// The client. Thread-safe: concurrent calls use separate connections from a small pool, so a blocking wait on one
// thread never stalls the watchdog on another. The host name is resolved once, for the first connection; later ones
// go to the address that answered: in Kubernetes MASTER_ADDR names a Service, whose record goes with the job (a
// deleted job's ranks still say goodbye to rank 0, which runs until they have).
class TcpStore : public Store {
 public:
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> wait(const std::vector<std::string>& keys, milliseconds timeout) override;
  std::vector<bool> check(const std::vector<std::string>& keys) override;
  bool erase(const std::string& key) override;

 private:
  Fd connect_with_retries(Clock::time_point deadline);
  Fd authenticate(Fd fd, Clock::time_point deadline);
  Bytes call(const Bytes& request, milliseconds server_wait);
  Fd acquire();
  void release(Fd fd);

  TcpStoreOptions options_;
  std::string address_;  // rank 0's numeric address, once the first connection reached it
  std::mutex mu_;
  std::vector<Fd> idle_;
};

}  // namespace torus::comm

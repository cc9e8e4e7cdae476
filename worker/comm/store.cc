#include "worker/comm/store.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <set>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::comm {

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::vector<std::string> PrefixStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const auto& k : keys) joined.push_back(join(k));
  std::vector<std::string> missing = base_->wait(joined, timeout);
  for (auto& k : missing) k = k.substr(prefix_.size() + 1);
  return missing;
}

std::vector<bool> PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> joined;
  for (const auto& k : keys) joined.push_back(join(k));
  return base_->check(joined);
}

namespace {

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4, kCheck = 5, kErase = 6 };
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kBadRequest = 2 };

constexpr char kGreeting[] = "TORUS-STORE-1";
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
constexpr milliseconds kHandshakeTimeout{5000};

std::vector<unsigned char> hmac_sha256(const std::string& key, const unsigned char* msg, size_t len) {
  std::vector<unsigned char> mac(EVP_MAX_MD_SIZE);
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg, len, mac.data(), &mac_len) == nullptr)
    throw SystemError("HMAC-SHA256 failed");
  mac.resize(mac_len);
  return mac;
}

}  // namespace

// ---------------------------------------------------------------- server

struct TcpStoreServer::State {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, Bytes> data;
  std::set<int> open_fds;
  std::vector<std::thread> connections;
  bool stopping = false;
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string secret)
    : secret_(std::move(secret)), listener_(listen_tcp(host, port)), state_(std::make_shared<State>()) {
  port_ = bound_port(listener_);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  wake_read_ = Fd(pipe_fds[0]);
  wake_write_ = Fd(pipe_fds[1]);
  acceptor_ = std::thread([this] { accept_loop(); });
  TLOG(Info) << "rendezvous store listening on " << host << ":" << port_;
}

TcpStoreServer::~TcpStoreServer() {
  std::vector<std::thread> connections;
  {
    std::lock_guard lock(state_->mu);
    state_->stopping = true;
    for (int fd : state_->open_fds) ::shutdown(fd, SHUT_RDWR);  // unblocks the connection threads
    connections.swap(state_->connections);
  }
  state_->changed.notify_all();
  char byte = 0;
  [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(state_->mu);
    for (auto& t : state_->connections) connections.push_back(std::move(t));
    state_->connections.clear();
  }
  for (auto& t : connections) t.join();
}

void TcpStoreServer::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      TLOG(Error) << "rendezvous store: poll failed: " << std::strerror(errno);
      return;
    }
    if (fds[1].revents != 0) return;
    Fd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    std::lock_guard lock(state_->mu);
    if (state_->stopping) return;
    state_->open_fds.insert(conn.get());
    state_->connections.emplace_back([this, c = std::move(conn)]() mutable { serve(std::move(c)); });
  }
}

namespace {

Bytes handle_request(std::unique_lock<std::mutex>& lock, std::condition_variable& changed,
                     std::map<std::string, Bytes>& data, const bool& stopping, const Bytes& request) {
  Decoder in(request);
  Encoder out;
  const auto op = static_cast<Op>(in.u8());
  switch (op) {
    case Op::kSet: {
      std::string key = in.str();
      data[key] = in.bytes();
      changed.notify_all();
      return out.u8(static_cast<uint8_t>(Status::kOk)).take();
    }
    case Op::kGet: {
      std::string key = in.str();
      const auto deadline = Clock::now() + milliseconds(in.i64());
      bool found = changed.wait_until(lock, deadline, [&] { return stopping || data.count(key) > 0; });
      if (!found || stopping) return out.u8(static_cast<uint8_t>(Status::kTimeout)).take();
      return out.u8(static_cast<uint8_t>(Status::kOk)).bytes(data[key]).take();
    }
    case Op::kAdd: {
      std::string key = in.str();
      const int64_t delta = in.i64();
      auto it = data.find(key);
      int64_t value = it == data.end() ? 0 : std::stoll(to_string(it->second));
      value += delta;
      data[key] = to_bytes(std::to_string(value));
      changed.notify_all();
      return out.u8(static_cast<uint8_t>(Status::kOk)).i64(value).take();
    }
    case Op::kWait: {
      const auto n = in.i64();
      std::vector<std::string> keys;
      for (int64_t i = 0; i < n; ++i) keys.push_back(in.str());
      const auto deadline = Clock::now() + milliseconds(in.i64());
      auto all_present = [&] {
        for (const auto& k : keys)
          if (data.count(k) == 0) return false;
        return true;
      };
      changed.wait_until(lock, deadline, [&] { return stopping || all_present(); });
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (data.count(k) == 0) missing.push_back(k);
      out.u8(static_cast<uint8_t>(missing.empty() ? Status::kOk : Status::kTimeout))
          .i64(static_cast<int64_t>(missing.size()));
      for (const auto& k : missing) out.str(k);
      return out.take();
    }
    case Op::kCheck: {
      const auto n = in.i64();
      out.u8(static_cast<uint8_t>(Status::kOk)).i64(n);
      for (int64_t i = 0; i < n; ++i) out.u8(data.count(in.str()) > 0 ? 1 : 0);
      return out.take();
    }
    case Op::kErase: {
      bool erased = data.erase(in.str()) > 0;
      return out.u8(static_cast<uint8_t>(Status::kOk)).u8(erased ? 1 : 0).take();
    }
  }
  return out.u8(static_cast<uint8_t>(Status::kBadRequest)).take();
}

}  // namespace

void TcpStoreServer::serve(Fd conn) {
  const std::string peer = peer_name(conn);
  auto forget = [&] {
    std::lock_guard lock(state_->mu);
    state_->open_fds.erase(conn.get());
  };
  // Challenge-response: the client proves it holds the secret without sending it.
  unsigned char nonce[kNonceBytes];
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) {
    forget();
    return;
  }
  const size_t greeting_len = sizeof(kGreeting) - 1;
  Bytes hello(greeting_len + sizeof(nonce));
  std::memcpy(hello.data(), kGreeting, greeting_len);
  std::memcpy(hello.data() + greeting_len, nonce, sizeof(nonce));
  Bytes answer;
  const auto hs_deadline = Clock::now() + kHandshakeTimeout;
  if (send_frame(conn, hello, hs_deadline) != IoStatus::kOk || recv_frame(conn, answer, hs_deadline) != IoStatus::kOk) {
    forget();
    return;
  }
  const auto expected = hmac_sha256(secret_, nonce, sizeof(nonce));
  const bool admitted = answer.size() == kMacBytes && CRYPTO_memcmp(answer.data(), expected.data(), kMacBytes) == 0;
  send_frame(conn, Bytes{static_cast<char>(admitted ? 1 : 0)}, hs_deadline);
  if (!admitted) {
    refused_.fetch_add(1);
    TLOG(Warn) << "rendezvous store: refused client " << peer << ": wrong or missing secret";
    forget();
    return;
  }
  admitted_.fetch_add(1);
  for (;;) {
    Bytes request;
    if (recv_frame(conn, request, Clock::time_point::max()) != IoStatus::kOk) break;
    Bytes response;
    try {
      std::unique_lock lock(state_->mu);
      if (state_->stopping) break;
      response = handle_request(lock, state_->changed, state_->data, state_->stopping, request);
    } catch (const std::exception& e) {
      TLOG(Warn) << "rendezvous store: bad request from " << peer << ": " << e.what();
      break;
    }
    if (send_frame(conn, response, Clock::now() + milliseconds(30000)) != IoStatus::kOk) break;
  }
  forget();
}

// ---------------------------------------------------------------- client

TcpStore::TcpStore(TcpStoreOptions options) : options_(std::move(options)) {
  Fd first = connect_with_retries(Clock::now() + options_.connect_timeout);
  address_ = peer_host(first);
  release(std::move(first));
}

TcpStore::~TcpStore() = default;

Fd TcpStore::connect_with_retries(Clock::time_point deadline) {
  auto backoff = milliseconds(10);
  std::string last_error;
  for (;;) {
    try {
      return authenticate(connect_tcp(address_.empty() ? options_.host : address_, options_.port, deadline), deadline);
    } catch (const InvalidArgument&) {
      throw;  // a refused secret does not get better by retrying
    } catch (const Error& e) {
      last_error = e.what();
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);  // rank 0 not up yet: back off (no condition to await across hosts)
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
  if (!address_.empty())
    throw Timeout("rendezvous store at " + options_.host + ":" + std::to_string(options_.port) + " (rank 0 at " +
                  address_ + ") no longer reachable within " + std::to_string(options_.reconnect_timeout.count()) +
                  " ms; rank 0 gone? last error: " + last_error);
  throw Timeout("rendezvous store at " + options_.host + ":" + std::to_string(options_.port) +
                " (MASTER_ADDR:MASTER_PORT) not reachable within " + std::to_string(options_.connect_timeout.count()) +
                " ms; rank 0 missing? last error: " + last_error);
}

Fd TcpStore::authenticate(Fd fd, Clock::time_point deadline) {
  const auto hs_deadline = std::min(deadline, Clock::now() + kHandshakeTimeout);
  Bytes hello;
  if (recv_frame(fd, hello, hs_deadline) != IoStatus::kOk)
    throw SystemError("rendezvous store: no greeting from " + options_.host);
  const size_t greeting_len = sizeof(kGreeting) - 1;
  if (hello.size() != greeting_len + kNonceBytes || std::string(hello.data(), greeting_len) != kGreeting)
    throw SystemError("rendezvous store: " + options_.host + ":" + std::to_string(options_.port) +
                      " is not a Torus rendezvous store");
  const auto mac =
      hmac_sha256(options_.secret, reinterpret_cast<const unsigned char*>(hello.data() + greeting_len), kNonceBytes);
  Bytes verdict;
  if (send_frame(fd, Bytes(mac.begin(), mac.end()), hs_deadline) != IoStatus::kOk ||
      recv_frame(fd, verdict, hs_deadline) != IoStatus::kOk || verdict.size() != 1)
    throw SystemError("rendezvous store: handshake with " + options_.host + " interrupted");
  if (verdict[0] != 1)
    throw InvalidArgument("rendezvous store at " + options_.host + ":" + std::to_string(options_.port) +
                          " refused this rank: the secret (TORUS_RENDEZVOUS_SECRET or TORUS_RENDEZVOUS_SECRET_FILE) "
                          "does not match the job's");
  return fd;
}

Fd TcpStore::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      Fd fd = std::move(idle_.back());
      idle_.pop_back();
      return fd;
    }
  }
  return connect_with_retries(Clock::now() + options_.reconnect_timeout);
}

void TcpStore::release(Fd fd) {
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(fd));
}

Bytes TcpStore::call(const Bytes& request, milliseconds server_wait) {
  Fd fd = acquire();
  const auto deadline = Clock::now() + server_wait + options_.request_timeout;
  Bytes response;
  IoStatus s = send_frame(fd, request, deadline);
  if (s == IoStatus::kOk) s = recv_frame(fd, response, deadline);
  if (s != IoStatus::kOk || response.empty())
    throw SystemError("rendezvous store at " + options_.host + ":" + std::to_string(options_.port) +
                      ": connection lost (" + (s == IoStatus::kTimeout ? "no answer" : "closed") +
                      "); rank 0 may have exited");
  release(std::move(fd));
  return response;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  call(Encoder().u8(static_cast<uint8_t>(Op::kSet)).str(key).bytes(value).take(), milliseconds(0));
}

Bytes TcpStore::get(const std::string& key, milliseconds timeout) {
  Bytes r = call(Encoder().u8(static_cast<uint8_t>(Op::kGet)).str(key).i64(timeout.count()).take(), timeout);
  Decoder in(r);
  if (static_cast<Status>(in.u8()) != Status::kOk)
    throw Timeout("rendezvous store: key '" + key + "' not set within " + std::to_string(timeout.count()) + " ms");
  return in.bytes();
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Bytes r = call(Encoder().u8(static_cast<uint8_t>(Op::kAdd)).str(key).i64(delta).take(), milliseconds(0));
  Decoder in(r);
  in.u8();
  return in.i64();
}

std::vector<std::string> TcpStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  Encoder req;
  req.u8(static_cast<uint8_t>(Op::kWait)).i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) req.str(k);
  req.i64(timeout.count());
  Bytes r = call(req.take(), timeout);
  Decoder in(r);
  in.u8();
  std::vector<std::string> missing(static_cast<size_t>(in.i64()));
  for (auto& k : missing) k = in.str();
  return missing;
}

std::vector<bool> TcpStore::check(const std::vector<std::string>& keys) {
  Encoder req;
  req.u8(static_cast<uint8_t>(Op::kCheck)).i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) req.str(k);
  Bytes r = call(req.take(), milliseconds(0));
  Decoder in(r);
  in.u8();
  std::vector<bool> present(static_cast<size_t>(in.i64()));
  for (size_t i = 0; i < present.size(); ++i) present[i] = in.u8() != 0;
  return present;
}

bool TcpStore::erase(const std::string& key) {
  Bytes r = call(Encoder().u8(static_cast<uint8_t>(Op::kErase)).str(key).take(), milliseconds(0));
  Decoder in(r);
  in.u8();
  return in.u8() != 0;
}

}  // namespace torus::comm

#pragma once
// Blocking POSIX TCP sockets with RAII and deadlines (poll), for the rendezvous store. Plain sockets rather than
// Boost.Asio: the store is a thread-per-connection server with a handful of clients, and blocking calls with
// poll() deadlines keep it short and easy to follow.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace torus::comm {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it once.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

enum class IoStatus { kOk, kClosed, kTimeout };

// Listening socket on host:port (port 0 picks a free one; see bound_port).
Fd listen_tcp(const std::string& host, int port);
int bound_port(const Fd& listener);
// One connection attempt; throws SystemError on refusal or unreachable host.
Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline);
std::string peer_name(const Fd& fd);
// The numeric address (no port) of a connected socket's peer, as connect_tcp takes it back.
std::string peer_host(const Fd& fd);

// Sends or receives exactly `len` bytes before `deadline`.
IoStatus send_all(const Fd& fd, const void* data, size_t len, Clock::time_point deadline);
IoStatus recv_all(const Fd& fd, void* data, size_t len, Clock::time_point deadline);

// A length-prefixed frame (u32 little-endian size, then bytes): the store protocol's unit.
IoStatus send_frame(const Fd& fd, const std::vector<char>& payload, Clock::time_point deadline);
IoStatus recv_frame(const Fd& fd, std::vector<char>& payload, Clock::time_point deadline);

// Writer/reader for frame payloads: u8, i64, length-prefixed strings.
class Encoder {
 public:
  Encoder& u8(uint8_t v);
  Encoder& i64(int64_t v);
  Encoder& str(const std::string& s);
  Encoder& bytes(const std::vector<char>& b);
  std::vector<char> take() { return std::move(buf_); }

 private:
  std::vector<char> buf_;
};

class Decoder {
 public:
  explicit Decoder(const std::vector<char>& buf) : buf_(buf) {}
  uint8_t u8();
  int64_t i64();
  std::string str();
  std::vector<char> bytes();

 private:
  void need(size_t n) const;
  const std::vector<char>& buf_;
  size_t pos_ = 0;
};

}  // namespace torus::comm

#include "worker/comm/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/util/destination.h"
#include "common/util/error.h"

namespace torus::comm {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfo resolve(const std::string& host, int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) throw SystemError("resolve " + host + ":" + service + ": " + gai_strerror(rc));
  return AddrInfo(res);
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until fd is ready for `events`; false on deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) throw_errno("poll");
  }
}

}  // namespace

Fd listen_tcp(const std::string& host, int port) {
  AddrInfo addrs = resolve(host, port, AI_PASSIVE);
  std::string last_error = "no address";
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 512) == 0) return fd;
    last_error = std::strerror(errno);
  }
  throw SystemError("listen on " + host + ":" + std::to_string(port) + ": " + last_error);
}

int bound_port(const Fd& listener) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno("getsockname");
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline) {
  AddrInfo addrs = resolve(host, port, 0);
  std::string last_error = "no address";
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    net::check_destination(a->ai_addr, "connect to " + host + ":" + std::to_string(port));
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd.valid()) continue;
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!wait_ready(fd.get(), POLLOUT, deadline)) {
        last_error = "connect timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  throw SystemError("connect to " + host + ":" + std::to_string(port) + ": " + last_error);
}

std::string peer_host(const Fd& fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno("getpeername");
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    throw SystemError("getnameinfo: the peer's address has no numeric form");
  return host;
}

std::string peer_name(const Fd& fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "?";
  return std::string(host) + ":" + serv;
}

IoStatus send_all(const Fd& fd, const void* data, size_t len, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd.get(), p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd.get(), POLLOUT, deadline)) return IoStatus::kTimeout;
      continue;
    }
    return IoStatus::kClosed;
  }
  return IoStatus::kOk;
}

IoStatus recv_all(const Fd& fd, void* data, size_t len, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd.get(), p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd.get(), POLLIN, deadline)) return IoStatus::kTimeout;
      continue;
    }
    return IoStatus::kClosed;
  }
  return IoStatus::kOk;
}

IoStatus send_frame(const Fd& fd, const std::vector<char>& payload, Clock::time_point deadline) {
  uint32_t size = static_cast<uint32_t>(payload.size());
  unsigned char header[4] = {static_cast<unsigned char>(size), static_cast<unsigned char>(size >> 8),
                             static_cast<unsigned char>(size >> 16), static_cast<unsigned char>(size >> 24)};
  IoStatus s = send_all(fd, header, sizeof(header), deadline);
  if (s != IoStatus::kOk) return s;
  return send_all(fd, payload.data(), payload.size(), deadline);
}

IoStatus recv_frame(const Fd& fd, std::vector<char>& payload, Clock::time_point deadline) {
  unsigned char header[4];
  IoStatus s = recv_all(fd, header, sizeof(header), deadline);
  if (s != IoStatus::kOk) return s;
  const uint32_t size = header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  constexpr uint32_t kMaxFrame = 256u << 20;  // a store value is an address or a small blob, never this big
  if (size > kMaxFrame) return IoStatus::kClosed;
  payload.resize(size);
  return recv_all(fd, payload.data(), size, deadline);
}

Encoder& Encoder::u8(uint8_t v) {
  buf_.push_back(static_cast<char>(v));
  return *this;
}

Encoder& Encoder::i64(int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}

Encoder& Encoder::str(const std::string& s) {
  i64(static_cast<int64_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
  return *this;
}

Encoder& Encoder::bytes(const std::vector<char>& b) {
  i64(static_cast<int64_t>(b.size()));
  buf_.insert(buf_.end(), b.begin(), b.end());
  return *this;
}

void Decoder::need(size_t n) const {
  if (buf_.size() - pos_ < n) throw CorruptData("rendezvous store: truncated message");
}

uint8_t Decoder::u8() {
  need(1);
  return static_cast<uint8_t>(buf_[pos_++]);
}

int64_t Decoder::i64() {
  need(8);
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(buf_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return static_cast<int64_t>(u);
}

std::string Decoder::str() {
  const auto n = static_cast<size_t>(i64());
  need(n);
  std::string s(buf_.data() + pos_, n);
  pos_ += n;
  return s;
}

std::vector<char> Decoder::bytes() {
  const auto n = static_cast<size_t>(i64());
  need(n);
  std::vector<char> b(buf_.begin() + static_cast<std::ptrdiff_t>(pos_),
                      buf_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
  pos_ += n;
  return b;
}

}  // namespace torus::comm

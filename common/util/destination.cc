#include "common/util/destination.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <memory>

#include "common/util/tunables.h"

namespace torus::net {
namespace {

std::string numeric(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof(text));
  if (address->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text, sizeof(text));
  return text;
}

[[noreturn]] void refuse(const std::string& what, const std::string& target) {
  throw DestinationRefused(what + ": refusing to connect to " + target +
                           ": TORUS_LOOPBACK_ONLY=1 allows only loopback destinations (127.0.0.0/8, ::1)");
}

}  // namespace

DestinationPolicy destination_policy() {
  static const DestinationPolicy policy = tunables::process_snapshot().integer("TORUS_LOOPBACK_ONLY").value_or(0) != 0
                                             ? DestinationPolicy::kLoopbackOnly
                                             : DestinationPolicy::kAny;
  return policy;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&ip)) return true;
    return IN6_IS_ADDR_V4MAPPED(&ip) && ip.s6_addr[12] == 127;
  }
  return false;
}

void check_destination(const sockaddr* address, const std::string& what, DestinationPolicy policy) {
  if (policy == DestinationPolicy::kLoopbackOnly && !is_loopback(address)) refuse(what, numeric(address));
}

void check_destination(const std::string& host, const std::string& what, DestinationPolicy policy) {
  if (policy == DestinationPolicy::kAny) return;
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0) refuse(what, "'" + host + "' (does not resolve: " + ::gai_strerror(rc) + ")");
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (!is_loopback(a->ai_addr)) refuse(what, "'" + host + "' (" + numeric(a->ai_addr) + ")");
  }
}

}  // namespace torus::net

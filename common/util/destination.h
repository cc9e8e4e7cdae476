#pragma once
// Where this process may connect. Our test machines must never send traffic beyond loopback, so every test runs
// with TORUS_LOOPBACK_ONLY=1 (torus_gtest sets it): a regression that targets another address then fails with
// DestinationRefused instead of leaving the machine. Production leaves it unset.
#include <sys/socket.h>

#include <string>

#include "common/util/error.h"

namespace torus::net {

enum class DestinationPolicy { kAny, kLoopbackOnly };

// A connection the destination policy forbids; never retried.
class DestinationRefused : public Error {
 public:
  using Error::Error;
};

// TORUS_LOOPBACK_ONLY (integer, default 0): 1 refuses every destination outside 127.0.0.0/8 and ::1 (also as
// ::ffff:127.x.y.z). Read once per process.
DestinationPolicy destination_policy();

bool is_loopback(const sockaddr* address);

// Throws DestinationRefused naming `what` and the address when `policy` forbids `address`.
void check_destination(const sockaddr* address, const std::string& what,
                       DestinationPolicy policy = destination_policy());
// Resolves `host` (a name or an IP literal, IPv6 with or without brackets) and checks every address it names.
void check_destination(const std::string& host, const std::string& what,
                       DestinationPolicy policy = destination_policy());

}  // namespace torus::net

#pragma once
// Random bytes from OpenSSL's CSPRNG (RAND_bytes), written as lowercase hex: the one source of secrets and unique
// suffixes (rendezvous secrets, Event and leader-election names, shared-memory segment names).
#include <cstddef>
#include <string>

namespace torus {

// `bytes` random bytes as 2 * bytes hex digits. Throws SystemError when OpenSSL has no randomness to give.
std::string random_hex(size_t bytes);
// A rendezvous secret: 32 random bytes, 64 hex digits.
std::string random_secret();

}  // namespace torus

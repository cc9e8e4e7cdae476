#include "common/util/random.h"

#include <openssl/rand.h>

#include <vector>

#include "common/util/error.h"

namespace torus {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    throw SystemError("RAND_bytes: no randomness for " + std::to_string(bytes) + " random bytes");
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char b : raw) out += {kHex[b >> 4], kHex[b & 15]};
  return out;
}

std::string random_secret() { return random_hex(32); }

}  // namespace torus

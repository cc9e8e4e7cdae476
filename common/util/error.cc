#include "common/util/error.h"

#include <cerrno>
#include <cstring>

namespace torus {

void throw_errno(const std::string& what) {
  const int err = errno;
  throw SystemError(what + ": " + std::strerror(err));
}

}  // namespace torus

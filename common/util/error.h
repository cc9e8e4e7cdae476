#pragma once
// Typed errors shared by every Torus component. Only `main` catches them (see main_guard.h).
#include <stdexcept>
#include <string>

namespace torus {

// Base of every error Torus throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a manifest, a flag, a data file. The message names the field or file and what was expected.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A file that exists but cannot be trusted: truncated data set, corrupt or mismatched checkpoint.
class CorruptData : public Error {
 public:
  using Error::Error;
};

// A deadline passed: a peer that never arrived, a collective that never finished.
class Timeout : public Error {
 public:
  using Error::Error;
};

// The run should resume from a checkpoint (the launcher saw one written) and none is there: deleted, or on storage
// this process does not see. run_main exits with launch::ExitCode::kCheckpointLost.
class CheckpointLost : public Error {
 public:
  using Error::Error;
};

// A fault of the machine under this process, not of the job: a GPU's uncorrectable memory error, a device the driver
// lost (worker/backend/cuda/error_class.h). The same job can run on healthy hardware, so run_main exits
// launch::ExitCode::kRetryable: the gang restarts from its checkpoint.
class HardwareFault : public Error {
 public:
  using Error::Error;
};

// The operating system refused: sockets, files, processes. Carries errno's text.
class SystemError : public Error {
 public:
  using Error::Error;
};

// Throws SystemError("<what>: <strerror(errno)>").
[[noreturn]] void throw_errno(const std::string& what);

}  // namespace torus

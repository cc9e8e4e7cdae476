#pragma once
// One problem with a TrainingJob, tied to the field it is about: "spec.training.batchSize: must be ...".
#include <string>
#include <string_view>
#include <vector>

namespace torus::api {

struct FieldError {
  std::string path;     // "spec.training.phases[1].toEpoch"; empty for the document as a whole
  std::string message;  // what was expected and what was found
  int line = 0;         // 1-based position in the source file when known (malformed YAML), else 0
  int column = 0;
  bool operator==(const FieldError&) const = default;

  // "path: message", or "line:column: message" for a position without a path.
  std::string to_string() const;
  // "FILE: path: message" (or "FILE:line:column: message"): the `torus validate` line.
  std::string to_string(std::string_view file) const;
};

using FieldErrors = std::vector<FieldError>;

// Throws torus::InvalidArgument whose message lists every error, one per line, each prefixed with `source`.
[[noreturn]] void throw_field_errors(const FieldErrors& errors, std::string_view source);

}  // namespace torus::api

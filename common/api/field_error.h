#pragma once
// One problem with a TrainingJob, tied to the field it is about: "spec.training.batchSize: must be ...", and, when
// the job was read from YAML, to where that field was written (source_map.h): "job.yaml:12:5: spec.training...".
#include <string>
#include <string_view>
#include <vector>

namespace torus::api {

struct FieldError {
  std::string path;     // "spec.training.phases[1].toEpoch"; empty for the document as a whole
  std::string message;  // what was expected and what was found
  int line = 0;         // 1-based position in the YAML source when known, else 0 (JSON has no positions)
  int column = 0;
  std::string origin;  // where the value came from when not the file, e.g. "--set spec.training.epochs"; else ""
  bool operator==(const FieldError&) const = default;

  // "[line:column: ][path: ]message" ("(document)" stands for an empty path without a position), or
  // "origin: path: message".
  std::string to_string() const;
  // The `torus validate` line, as compilers write it: "FILE:line:column: path: message", "FILE: path: message"
  // when there is no position (JSON), "origin: path: message" for a value given on the command line.
  std::string to_string(std::string_view file) const;
};

using FieldErrors = std::vector<FieldError>;

// Throws torus::InvalidArgument whose message lists every error, one per line, each prefixed with `source`.
[[noreturn]] void throw_field_errors(const FieldErrors& errors, std::string_view source);

}  // namespace torus::api

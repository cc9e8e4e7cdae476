#pragma once
// TrainingJob <-> JSON / YAML. Decoding is strict: an unknown field or a wrong type is an error naming its path
// (`spec.training.batchSze: unknown field`), except inside the opaque `spec.gang.resources` and
// `spec.gang.template`. Every error is collected; nothing is silently dropped. YAML is read with the YAML 1.2
// core schema (yaml.h). Errors in YAML carry the line:column of their field (source_map.h); a malformed file
// reports where the parser stopped.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/api/field_error.h"
#include "common/api/source_map.h"
#include "common/api/training_job.h"

namespace torus::api {

struct Decoded {
  TrainingJob job;     // what could be read; fields with errors are left unset
  FieldErrors errors;  // empty when the document is a well-formed TrainingJob (not yet validated: validation.h)
  SourceMap sources;   // where each field was written (YAML); empty for JSON. check_decoded() locates errors with it
};

Decoded decode_json(const nlohmann::json& document);
// A YAML stream must hold exactly one document. The errors carry their line:column.
Decoded decode_yaml(std::string_view text);
// Reads and decodes a file; an unreadable file is reported as an error with an empty path.
Decoded decode_file(const std::string& path);

// Throwing forms, for programs that only go on with a well-formed job: InvalidArgument lists every error.
TrainingJob from_json(const nlohmann::json& document);
TrainingJob from_yaml(std::string_view text, std::string_view source = "");

nlohmann::json to_json(const TrainingJob& job);
std::string to_yaml(const TrainingJob& job);
nlohmann::json status_to_json(const TrainingJobStatus& status);  // for PATCHing the status subresource
nlohmann::json spec_to_json(const TrainingJobSpec& spec);

}  // namespace torus::api

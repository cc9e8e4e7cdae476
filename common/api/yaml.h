#pragma once
// YAML <-> JSON, the one place that resolves YAML scalars: the YAML 1.2 core schema, used by the TrainingJob codec
// (codec.h), `torus run --set` and the API stand-in's manifests (tests/apiserver/yaml_json.h).
//   plain scalars: null, Null, NULL, ~ and the empty scalar -> null; true/True/TRUE, false/False/FALSE -> booleans;
//   [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+ -> integers (an integer beyond int64 becomes the nearest double, as Go's
//   YAML decoder does); decimal floats and .inf/-.inf/.nan (three spellings each) -> floats; anything else
//   (yes/no/on/off included) -> a string.
//   quoted and block scalars (and the !!str tag) -> always strings.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/api/field_error.h"
#include "common/api/source_map.h"

namespace torus::api {

// The JSON value of a plain (unquoted) scalar's text under the core schema above.
nlohmann::json resolve_plain_scalar(const std::string& text);

// A YAML node as JSON. Duplicate keys and non-scalar keys are reported as FieldErrors at their JSON path and
// position; with `sources`, it records where every map entry (its key) and list element was written.
nlohmann::json yaml_to_json(const YAML::Node& node, FieldErrors& errors, SourceMap* sources = nullptr);
// Parses a YAML text holding one document; malformed YAML becomes a FieldError with line and column.
nlohmann::json parse_yaml_document(std::string_view text, FieldErrors& errors, SourceMap* sources = nullptr);
// JSON as YAML; strings that would read back as something else (in YAML 1.2, or in kubectl's YAML 1.1) are quoted.
std::string json_to_yaml(const nlohmann::json& value);

}  // namespace torus::api

#pragma once
// YAML manifests to JSON objects, the scalars resolved by common/api/yaml.h (YAML 1.2 core schema).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

// Every document of a YAML stream (multi-document files separated by ---), empty documents skipped. Throws
// InvalidArgument naming `source` and the line on a parse error or a duplicate or non-scalar map key.
std::vector<nlohmann::json> yaml_documents(const std::string& text, const std::string& source);
std::vector<nlohmann::json> yaml_file_documents(const std::string& path);

}  // namespace torus::standin

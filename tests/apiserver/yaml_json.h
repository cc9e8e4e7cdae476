#pragma once
// YAML manifests to JSON objects (yaml-cpp), resolving plain scalars the way YAML 1.2's core schema does:
// true/false, null/~, integers and floats become JSON values; quoted scalars stay strings.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

// Every document of a YAML stream (multi-document files separated by ---), empty documents skipped. Throws
// InvalidArgument naming `source` and the line on a parse error.
std::vector<nlohmann::json> yaml_documents(const std::string& text, const std::string& source);
std::vector<nlohmann::json> yaml_file_documents(const std::string& path);

}  // namespace torus::standin

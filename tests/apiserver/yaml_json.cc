#include "tests/apiserver/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "common/api/yaml.h"
#include "common/util/error.h"

namespace torus::standin {

std::vector<nlohmann::json> yaml_documents(const std::string& text, const std::string& source) {
  std::vector<nlohmann::json> out;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      api::FieldErrors errors;
      nlohmann::json value = api::yaml_to_json(doc, errors);
      if (!errors.empty()) throw InvalidArgument(errors.front().to_string(source));
      if (!value.is_null()) out.push_back(std::move(value));
    }
  } catch (const YAML::Exception& e) {
    throw InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  return out;
}

std::vector<nlohmann::json> yaml_file_documents(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return yaml_documents(text.str(), path);
}

}  // namespace torus::standin

#include "tests/apiserver/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "common/util/error.h"

namespace torus::standin {

namespace {

nlohmann::json plain_scalar(const std::string& s) {
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex floating(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (std::regex_match(s, integer)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;
    }
  }
  if (std::regex_match(s, floating)) return std::stod(s);
  return s;
}

nlohmann::json to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // "?" is the tag of a plain (unquoted) scalar; quoted ones are "!".
      return node.Tag() == "?" ? plain_scalar(node.Scalar()) : nlohmann::json(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(to_json(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = to_json(kv.second);
      return out;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<nlohmann::json> yaml_documents(const std::string& text, const std::string& source) {
  std::vector<nlohmann::json> out;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      nlohmann::json value = to_json(doc);
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

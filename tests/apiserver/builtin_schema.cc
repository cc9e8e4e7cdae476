#include "tests/apiserver/builtin_schema.h"

#include <fstream>
#include <regex>

#include "common/util/error.h"

namespace torus::standin {

namespace {

using json = nlohmann::json;

const json& schema() {
  static const json loaded = [] {
    std::ifstream in(TORUS_STANDIN_BUILTIN_SCHEMA);
    if (!in) throw CorruptData(std::string(TORUS_STANDIN_BUILTIN_SCHEMA) + ": cannot read the built-in kinds' schema");
    json parsed = json::parse(in, nullptr, false);
    if (!parsed.is_object() || !parsed.contains("types") || !parsed.contains("kinds")) {
      throw CorruptData(std::string(TORUS_STANDIN_BUILTIN_SCHEMA) + ": expected an object with kinds and types");
    }
    return parsed;
  }();
  return loaded;
}

std::string json_kind(const json& value) {
  if (value.is_string()) return "string";
  if (value.is_number()) return "number";
  if (value.is_boolean()) return "bool";
  if (value.is_array()) return "array";
  return "object";
}

// "V1DeploymentSpec" -> "DeploymentSpec", "RbacV1Subject" -> "Subject": the Go type's name.
std::string go_struct(const std::string& model) {
  static const std::regex prefix("^([A-Z][a-z]+)?V[0-9]+((alpha|beta)[0-9]+)?");
  return std::regex_replace(model, prefix, "", std::regex_constants::format_first_only);
}

bool scalar_fits(const std::string& type, const json& value) {
  if (type == "int") return value.is_number_integer();
  if (type == "float") return value.is_number();
  if (type == "bool") return value.is_boolean();
  return value.is_string() || value.is_number();  // str, datetime, date, bytes (Quantity: a number too)
}

class Checker {
 public:
  Checker(FieldProblems& out, PathStyle style) : out_(out), style_(style) {}

  void walk(const std::string& type, json& value, const std::string& path, const std::string& owner) {
    if (value.is_null() || type == "object") return;
    if (type.rfind("List[", 0) == 0) {
      if (!value.is_array()) return mistyped(value, path, owner, "[]" + go_struct(inner(type, 5)));
      for (size_t i = 0; i < value.size(); ++i) walk(inner(type, 5), value[i], path + element(value[i], i), owner);
      return;
    }
    if (type.rfind("Dict[str, ", 0) == 0) {
      if (!value.is_object()) return mistyped(value, path, owner, "map[string]" + go_struct(inner(type, 10)));
      for (auto& [key, item] : value.items()) walk(inner(type, 10), item, join(path, key), owner);
      return;
    }
    const json& types = schema()["types"];
    if (!types.contains(type)) {
      if (!scalar_fits(type, value)) mistyped(value, path, owner, type);
      return;
    }
    if (!value.is_object()) return mistyped(value, path, owner, go_struct(type));
    const json& fields = types[type];
    std::vector<std::string> unknown;
    for (auto& [key, item] : value.items()) {
      if (!fields.contains(key)) {
        unknown.push_back(key);
        out_.unknown.push_back(join(path, key));  // in the order the decoder meets them
      } else {
        walk(fields[key].get<std::string>(), item, join(path, key), go_struct(type));
      }
    }
    for (const std::string& key : unknown) value.erase(key);
  }

 private:
  static std::string inner(const std::string& type, size_t skip) { return type.substr(skip, type.size() - skip - 1); }
  std::string join(const std::string& path, const std::string& key) const {
    return path.empty() && style_ == PathStyle::kDecoder ? key : path + "." + key;
  }
  std::string element(const json& item, size_t i) const {
    if (style_ == PathStyle::kApply && item.is_object() && item.contains("name") && item["name"].is_string()) {
      return "[name=\"" + item["name"].get<std::string>() + "\"]";
    }
    return "[" + std::to_string(i) + "]";
  }
  void mistyped(const json& value, const std::string& path, const std::string& owner, const std::string& type) {
    if (!out_.mistyped.empty()) return;
    out_.mistyped = "json: cannot unmarshal " + json_kind(value) + " into Go struct field " + owner + "." + path +
                    " of type " + type;
  }

  FieldProblems& out_;
  PathStyle style_;
};

}  // namespace

FieldProblems check_builtin_fields(const std::string& api_version, const std::string& kind, json& object,
                                   PathStyle style) {
  FieldProblems problems;
  const json& kinds = schema()["kinds"];
  const std::string key = api_version + " " + kind;
  if (!kinds.contains(key)) return problems;
  const std::string model = kinds[key].get<std::string>();
  Checker(problems, style).walk(model, object, "", go_struct(model));
  return problems;
}

std::string builtin_schema_source() { return schema().value("source", ""); }

}  // namespace torus::standin

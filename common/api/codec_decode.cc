// TrainingJob decoding: JSON or YAML into the structs, strictly (every unknown field and wrong type is an error
// naming its path), with every error collected.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "common/api/codec.h"
#include "common/api/codec_fields.h"
#include "common/api/yaml.h"
#include "common/util/error.h"

namespace torus::api {
namespace {

using codec::ApiEnum;
using codec::describe;
using codec::json;

std::string describe_value(const json& j) {
  std::string text = j.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string json_type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      return "a map";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::null:
      return "null";
    default:
      return "a value";
  }
}

std::string join(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

class Decoder {
 public:
  explicit Decoder(FieldErrors& errors) : errors_(errors) {}

  void wrong_type(const std::string& path, const char* expected, const json& j) {
    errors_.push_back(
        {path, std::string("must be ") + expected + ", got " + json_type_name(j) + " " + describe_value(j)});
  }

  void read(const json& j, const std::string& path, bool& out) {
    if (!j.is_boolean()) return wrong_type(path, "a boolean (true or false)", j);
    out = j.get<bool>();
  }

  template <std::integral T>
  requires(!std::same_as<T, bool>) void read(const json& j, const std::string& path, T& out) {
    if (!j.is_number_integer()) return wrong_type(path, "an integer", j);
    const bool fits = j.is_number_unsigned() ? j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                             : j.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                   j.get<int64_t>() <= std::numeric_limits<T>::max();
    if (!fits) {
      errors_.push_back({path, "must fit in " + std::to_string(sizeof(T) * 8) + " bits, got " + describe_value(j)});
      return;
    }
    out = j.get<T>();
  }

  void read(const json& j, const std::string& path, double& out) {
    if (!j.is_number()) return wrong_type(path, "a number", j);
    out = j.get<double>();
  }

  void read(const json& j, const std::string& path, std::string& out) {
    if (!j.is_string()) return wrong_type(path, "a string", j);
    out = j.get<std::string>();
  }

  // Opaque Kubernetes objects (resources, pod template): any map, kept as is.
  void read(const json& j, const std::string& path, json& out) {
    if (!j.is_object()) return wrong_type(path, "a map", j);
    out = j;
  }

  void read(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
    if (!j.is_object()) return wrong_type(path, "a map of strings", j);
    for (const auto& [key, value] : j.items()) {
      std::string s;
      const size_t before = errors_.size();
      read(value, path + "[" + key + "]", s);
      if (errors_.size() == before) out[key] = s;
    }
  }

  template <ApiEnum E>
  void read(const json& j, const std::string& path, E& out) {
    if (!j.is_string()) return wrong_type(path, ("one of " + enum_choices<E>()).c_str(), j);
    auto parsed = parse_enum<E>(j.get<std::string>());
    if (!parsed) {
      errors_.push_back({path, "must be one of " + enum_choices<E>() + ", got " + describe_value(j)});
      return;
    }
    out = *parsed;
  }

  template <class T>
  void read(const json& j, const std::string& path, std::optional<T>& out) {
    if (j.is_null()) return;  // Kubernetes reads null as "not given"
    T value{};
    const size_t before = errors_.size();
    read(j, path, value);
    if (errors_.size() == before) out = std::move(value);
  }

  template <class T>
  void read(const json& j, const std::string& path, std::vector<T>& out) {
    if (j.is_null()) return;
    if (!j.is_array()) return wrong_type(path, "a list", j);
    for (size_t i = 0; i < j.size(); ++i) {
      T item{};
      read(j[i], path + "[" + std::to_string(i) + "]", item);
      out.push_back(std::move(item));
    }
  }

  template <class S>
  requires std::is_class_v<S>
  void read(const json& j, const std::string& path, S& out) {
    if (j.is_null()) return;
    if (!j.is_object()) return wrong_type(path, "a map", j);
    FieldVisitor visitor{*this, j, path, {}};
    describe(visitor, out);
    for (const auto& [key, value] : j.items()) {
      if (!visitor.seen.count(key)) errors_.push_back({join(path, key), "unknown field"});
    }
  }

 private:
  struct FieldVisitor {
    Decoder& decoder;
    const json& object;
    const std::string& path;
    std::set<std::string> seen;

    template <class T>
    void operator()(const char* name, T& member) {
      seen.insert(name);
      auto it = object.find(name);
      // Kubernetes reads a null field as "not given".
      if (it != object.end() && !it->is_null()) decoder.read(*it, join(path, name), member);
    }
    void tolerate(const char* name) { seen.insert(name); }
  };

  FieldErrors& errors_;
};

Decoded decode_parsed(const json& document, FieldErrors errors) {
  Decoded out;
  out.job.api_version.clear();
  out.job.kind.clear();
  Decoder decoder(out.errors);
  out.errors = std::move(errors);
  if (!document.is_object()) {
    out.errors.push_back({"", "a TrainingJob must be a map, got " + json_type_name(document)});
    return out;
  }
  decoder.read(document, "", out.job);
  return out;
}

}  // namespace

Decoded decode_json(const json& document) { return decode_parsed(document, {}); }

Decoded decode_yaml(std::string_view text) {
  FieldErrors errors;
  SourceMap sources;
  json document = parse_yaml_document(text, errors, &sources);
  Decoded out;
  if (!errors.empty() && document.is_null()) {
    out.errors = std::move(errors);
  } else {
    out = decode_parsed(document, std::move(errors));
  }
  sources.locate(out.errors);
  out.sources = std::move(sources);
  return out;
}

Decoded decode_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Decoded out;
    out.errors.push_back({"", "cannot read file: " + std::string(std::strerror(errno))});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  const bool is_json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
  if (!is_json) return decode_yaml(text.str());
  const json document = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    Decoded out;
    out.errors.push_back({"", "malformed JSON"});
    return out;
  }
  return decode_json(document);
}

TrainingJob from_json(const json& document) {
  Decoded decoded = decode_json(document);
  if (!decoded.errors.empty()) throw_field_errors(decoded.errors, "");
  return std::move(decoded.job);
}

TrainingJob from_yaml(std::string_view text, std::string_view source) {
  Decoded decoded = decode_yaml(text);
  if (!decoded.errors.empty()) throw_field_errors(decoded.errors, source);
  return std::move(decoded.job);
}

}  // namespace torus::api

// TrainingJob encoding: the structs into JSON or YAML, leaving out what is unset, empty or default.
#include <concepts>

#include "common/api/codec.h"
#include "common/api/codec_fields.h"
#include "common/api/yaml.h"

namespace torus::api {
namespace {

using codec::ApiEnum;
using codec::describe;
using codec::IsOptional;
using codec::IsVector;
using codec::json;

json encode(const bool& v) { return v; }
template <std::integral T>
requires(!std::same_as<T, bool>) json encode(const T& v) { return v; }
json encode(const double& v) { return v; }
json encode(const std::string& v) { return v; }
json encode(const json& v) { return v; }
json encode(const std::map<std::string, std::string>& v) { return json(v); }
template <ApiEnum E>
json encode(const E& v) {
  return std::string(to_string(v));
}
template <class T>
json encode(const std::vector<T>& v);
template <class S>
requires std::is_class_v<S> json encode(const S& s);

// Unset, empty and all-default members are left out, so that decode(encode(x)) == x and manifests stay short.
template <class T>
bool omitted(const T& v) {
  if constexpr (IsOptional<T>::value) {
    return !v.has_value();
  } else if constexpr (std::same_as<T, std::string> || IsVector<T>::value ||
                       std::same_as<T, std::map<std::string, std::string>>) {
    return v.empty();
  } else if constexpr (std::same_as<T, json>) {
    return v.is_null();
  } else if constexpr (std::is_class_v<T>) {
    return v == T{};
  } else {
    return false;
  }
}

struct EncodeVisitor {
  json& out;
  template <class T>
  void operator()(const char* name, const T& member) {
    if (omitted(member)) return;
    if constexpr (IsOptional<T>::value) {
      out[name] = encode(*member);
    } else {
      out[name] = encode(member);
    }
  }
  void tolerate(const char*) {}
};

template <class T>
json encode(const std::vector<T>& v) {
  json out = json::array();
  for (const auto& item : v) out.push_back(encode(item));
  return out;
}

template <class S>
requires std::is_class_v<S> json encode(const S& s) {
  json out = json::object();
  EncodeVisitor visitor{out};
  describe(visitor, s);
  return out;
}

}  // namespace

json to_json(const TrainingJob& job) { return encode(job); }
json status_to_json(const TrainingJobStatus& status) { return encode(status); }
json spec_to_json(const TrainingJobSpec& spec) { return encode(spec); }

std::string to_yaml(const TrainingJob& job) { return json_to_yaml(to_json(job)); }

}  // namespace torus::api

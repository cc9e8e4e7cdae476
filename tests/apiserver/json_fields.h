#pragma once
// Reading an API object's fields as the apiserver's Go types see them: an absent field and a null one are the same
// (a nil pointer), and a field of another JSON type than expected reads as absent (decoding refuses such objects
// before admission runs, so readers need not). Internal to tests/apiserver.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace torus::standin::json_fields {

using json = nlohmann::json;

// The field, or null.
inline const json& field_at(const json& object, const char* key) {
  static const json absent;
  if (!object.is_object()) return absent;
  auto it = object.find(key);
  return it == object.end() ? absent : *it;
}

// Set and not null: Go's non-nil pointer.
inline bool has_field(const json& object, const char* key) { return !field_at(object, key).is_null(); }

inline std::optional<bool> bool_field(const json& object, const char* key) {
  const json& value = field_at(object, key);
  if (!value.is_boolean()) return std::nullopt;
  return value.get<bool>();
}

// The string, or "" (Go's zero value).
inline std::string string_field(const json& object, const char* key) {
  const json& value = field_at(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

inline std::optional<int64_t> int_field(const json& object, const char* key) {
  const json& value = field_at(object, key);
  if (!value.is_number_integer()) return std::nullopt;
  return value.get<int64_t>();
}

// The array, or an empty one.
inline const json& list_field(const json& object, const char* key) {
  static const json none = json::array();
  const json& value = field_at(object, key);
  return value.is_array() ? value : none;
}

}  // namespace torus::standin::json_fields

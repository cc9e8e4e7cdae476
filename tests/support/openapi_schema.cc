#include "tests/support/openapi_schema.h"

#include <cmath>
#include <cstdint>
#include <regex>
#include <set>
#include <sstream>

#include "common/util/error.h"

namespace torus::openapi {
namespace {

std::string compact(const json& value) { return value.dump(); }

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string item_path(const std::string& parent, size_t index) { return parent + "[" + std::to_string(index) + "]"; }

std::string map_path(const std::string& parent, const std::string& key) { return parent + "[" + key + "]"; }

bool flag(const json& schema, const char* key) {
  auto it = schema.find(key);
  return it != schema.end() && it->is_boolean() && it->get<bool>();
}

bool preserves_unknown(const json& schema) { return flag(schema, "x-kubernetes-preserve-unknown-fields"); }

// Pruning and validation both need the same notion of "fields this object may carry".
bool is_known_field(const json& schema, const std::string& key, bool at_resource_root) {
  if (at_resource_root && (key == "apiVersion" || key == "kind" || key == "metadata")) return true;
  if (flag(schema, "x-kubernetes-embedded-resource") && (key == "apiVersion" || key == "kind" || key == "metadata")) {
    return true;
  }
  auto props = schema.find("properties");
  return props != schema.end() && props->is_object() && props->contains(key);
}

std::string type_of(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    default:
      return "unknown";
  }
}

// RFC 3339's date-time as the apiserver's format check (kube-openapi strfmt) reads it: a calendar date, `T`, a time
// of day (hour <= 23, minute and second <= 59), an optional fraction and a zone (Z or +hh:mm); case-insensitive.
bool is_date_time(const std::string& text) {
  static const std::regex kRfc3339(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$)");
  std::smatch m;
  if (!std::regex_match(text, m, kRfc3339)) return false;
  const int year = std::stoi(m[1]), month = std::stoi(m[2]), day = std::stoi(m[3]);
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[month - 1] + (month == 2 && leap)) return false;
  return std::stoi(m[4]) <= 23 && std::stoi(m[5]) <= 59 && std::stoi(m[6]) <= 59;
}

class Validator {
 public:
  explicit Validator(const ValidateOptions& options) : options_(options) {}

  void check(const json& schema, const json& value, const std::string& path, bool at_resource_root) {
    if (!schema.is_object()) return;
    if (value.is_null()) {
      if (flag(schema, "nullable")) return;
      if (schema.contains("type"))
        add(path, ErrorKind::kType, "Invalid value: null: must be of type " + type_name(schema));
      return;
    }
    if (!check_type(schema, value, path)) return;
    check_enum(schema, value, path);
    if (value.is_number()) check_number(schema, value, path);
    if (value.is_string()) check_string(schema, value, path);
    if (value.is_array()) check_array(schema, value, path);
    if (value.is_object()) check_object(schema, value, path, at_resource_root);
    check_combinators(schema, value, path, at_resource_root);
  }

  std::vector<SchemaError> take() { return std::move(errors_); }

 private:
  static std::string type_name(const json& schema) {
    auto t = schema.find("type");
    return t != schema.end() && t->is_string() ? t->get<std::string>() : "any";
  }

  void add(const std::string& path, ErrorKind kind, std::string message) {
    errors_.push_back({path, kind, std::move(message)});
  }

  bool check_type(const json& schema, const json& value, const std::string& path) {
    if (flag(schema, "x-kubernetes-int-or-string")) {
      if (value.is_number_integer() || value.is_string()) return true;
      add(path, ErrorKind::kType, "Invalid value: " + compact(value) + ": must be an integer or a string");
      return false;
    }
    auto t = schema.find("type");
    if (t == schema.end() || !t->is_string()) return true;
    const std::string want = t->get<std::string>();
    const std::string got = type_of(value);
    const bool ok = want == got || (want == "number" && got == "integer");
    if (!ok) {
      add(path, ErrorKind::kType, "Invalid value: " + compact(value) + ": must be of type " + want + ", got " + got);
      return false;
    }
    check_format(schema, value, path);
    return true;
  }

  void check_format(const json& schema, const json& value, const std::string& path) {
    auto f = schema.find("format");
    if (f == schema.end() || !f->is_string()) return;
    const std::string format = f->get<std::string>();
    if (format == "int32" && value.is_number_integer()) {
      const bool fits = value.is_number_unsigned()
                            ? value.get<uint64_t>() <= INT32_MAX
                            : value.get<int64_t>() >= INT32_MIN && value.get<int64_t>() <= INT32_MAX;
      if (!fits) add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": must fit in int32");
    } else if (format == "int64" && value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX) {
      add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": must fit in int64");
    } else if (format == "date-time" && value.is_string() && !is_date_time(value.get<std::string>())) {
      add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": must be an RFC 3339 date-time");
    }
  }

  void check_enum(const json& schema, const json& value, const std::string& path) {
    auto e = schema.find("enum");
    if (e == schema.end() || !e->is_array()) return;
    for (const auto& allowed : *e) {
      if (allowed == value) return;
    }
    std::string supported;
    for (const auto& allowed : *e) supported += (supported.empty() ? "" : ", ") + compact(allowed);
    add(path, ErrorKind::kUnsupported, "Unsupported value: " + compact(value) + ": supported values: " + supported);
  }

  void check_number(const json& schema, const json& value, const std::string& path) {
    const double v = value.get<double>();
    if (auto m = schema.find("minimum"); m != schema.end() && m->is_number()) {
      const bool exclusive = flag(schema, "exclusiveMinimum");
      if (exclusive ? !(v > m->get<double>()) : !(v >= m->get<double>())) {
        add(path, ErrorKind::kInvalid,
            "Invalid value: " + compact(value) + ": should be greater than " + (exclusive ? "" : "or equal to ") +
                compact(*m));
      }
    }
    if (auto m = schema.find("maximum"); m != schema.end() && m->is_number()) {
      const bool exclusive = flag(schema, "exclusiveMaximum");
      if (exclusive ? !(v < m->get<double>()) : !(v <= m->get<double>())) {
        add(path, ErrorKind::kInvalid,
            "Invalid value: " + compact(value) + ": should be less than " + (exclusive ? "" : "or equal to ") +
                compact(*m));
      }
    }
    if (auto m = schema.find("multipleOf"); m != schema.end() && m->is_number() && m->get<double>() > 0) {
      const double q = v / m->get<double>();
      if (std::fabs(q - std::round(q)) > 1e-9) {
        add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": should be a multiple of " + compact(*m));
      }
    }
  }

  void check_string(const json& schema, const json& value, const std::string& path) {
    const std::string s = value.get<std::string>();
    // Kubernetes counts characters (runes), not bytes.
    size_t runes = 0;
    for (unsigned char c : s) runes += (c & 0xC0) != 0x80;
    if (auto m = schema.find("minLength"); m != schema.end() && m->is_number_integer() && runes < m->get<size_t>()) {
      add(path, ErrorKind::kInvalid,
          "Invalid value: " + compact(value) + ": should be at least " + compact(*m) + " chars long");
    }
    if (auto m = schema.find("maxLength"); m != schema.end() && m->is_number_integer() && runes > m->get<size_t>()) {
      add(path, ErrorKind::kTooLong, "Too long: may not be longer than " + compact(*m));
    }
    if (auto p = schema.find("pattern"); p != schema.end() && p->is_string()) {
      // OpenAPI patterns are unanchored searches, like Go's regexp.MatchString.
      if (!std::regex_search(s, std::regex(p->get<std::string>(), std::regex::ECMAScript))) {
        add(path, ErrorKind::kInvalid,
            "Invalid value: " + compact(value) + ": should match '" + p->get<std::string>() + "'");
      }
    }
  }

  // x-kubernetes-list-type: a `set` holds each value once, a `map` each combination of its list-map-keys once; the
  // apiserver refuses the later duplicate (Duplicate value, at its index).
  void check_list_type(const json& schema, const json& value, const std::string& path) {
    const std::string list_type = schema.value("x-kubernetes-list-type", "");
    if (list_type != "set" && list_type != "map") return;
    std::set<std::string> seen;
    for (size_t i = 0; i < value.size(); ++i) {
      json key = value[i];
      if (list_type == "map") {
        if (!value[i].is_object()) continue;
        key = json::object();
        for (const json& k : schema.value("x-kubernetes-list-map-keys", json::array())) {
          if (k.is_string() && value[i].contains(k.get<std::string>()))
            key[k.get<std::string>()] = value[i][k.get<std::string>()];
        }
      }
      if (!seen.insert(key.dump()).second)
        add(item_path(path, i), ErrorKind::kDuplicate, "Duplicate value: " + compact(key));
    }
  }

  void check_array(const json& schema, const json& value, const std::string& path) {
    if (auto m = schema.find("minItems");
        m != schema.end() && m->is_number_integer() && value.size() < m->get<size_t>()) {
      add(path, ErrorKind::kInvalid,
          "Invalid value: " + std::to_string(value.size()) + ": should have at least " + compact(*m) + " items");
    }
    if (auto m = schema.find("maxItems");
        m != schema.end() && m->is_number_integer() && value.size() > m->get<size_t>()) {
      add(path, ErrorKind::kTooMany,
          "Too many: " + std::to_string(value.size()) + ": must have at most " + compact(*m) + " items");
    }
    check_list_type(schema, value, path);
    if (flag(schema, "uniqueItems")) {
      std::set<std::string> seen;
      for (size_t i = 0; i < value.size(); ++i) {
        if (!seen.insert(value[i].dump()).second) {
          add(item_path(path, i), ErrorKind::kDuplicate, "Duplicate value: " + compact(value[i]));
        }
      }
    }
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) {
      for (size_t i = 0; i < value.size(); ++i) check(*items, value[i], item_path(path, i), false);
    }
  }

  void check_object(const json& schema, const json& value, const std::string& path, bool at_resource_root) {
    if (auto req = schema.find("required"); req != schema.end() && req->is_array()) {
      for (const auto& name : *req) {
        if (name.is_string() && !value.contains(name.get<std::string>())) {
          add(child_path(path, name.get<std::string>()), ErrorKind::kRequired, "Required value");
        }
      }
    }
    if (auto m = schema.find("minProperties");
        m != schema.end() && m->is_number_integer() && value.size() < m->get<size_t>()) {
      add(path, ErrorKind::kInvalid, "Invalid value: should have at least " + compact(*m) + " properties");
    }
    if (auto m = schema.find("maxProperties");
        m != schema.end() && m->is_number_integer() && value.size() > m->get<size_t>()) {
      add(path, ErrorKind::kTooMany,
          "Too many: " + std::to_string(value.size()) + ": must have at most " + compact(*m) + " properties");
    }
    const auto props = schema.find("properties");
    const auto additional = schema.find("additionalProperties");
    for (const auto& [key, child] : value.items()) {
      if (at_resource_root && key == "metadata") {
        check_metadata(schema, child);
      } else if (props != schema.end() && props->is_object() && props->contains(key)) {
        check((*props)[key], child, child_path(path, key), false);
      } else if (additional != schema.end() && additional->is_object()) {
        check(*additional, child, map_path(path, key), false);
      } else if (additional != schema.end() && additional->is_boolean() && additional->get<bool>()) {
        continue;
      } else if (!is_known_field(schema, key, at_resource_root) && !preserves_unknown(schema) &&
                 options_.unknown_fields == UnknownFields::kReport) {
        add(child_path(path, key), ErrorKind::kUnknownField, "unknown field");
      }
    }
  }

  // ObjectMeta belongs to the apiserver: a CRD schema may only constrain metadata.name and generateName.
  void check_metadata(const json& root_schema, const json& metadata) {
    if (!metadata.is_object()) {
      add("metadata", ErrorKind::kType, "Invalid value: " + compact(metadata) + ": must be of type object");
      return;
    }
    const json* schema = root_schema.contains("properties") ? &root_schema["properties"] : nullptr;
    if (!schema || !schema->is_object() || !schema->contains("metadata")) return;
    schema = &(*schema)["metadata"];
    if (!schema->contains("properties") || !(*schema)["properties"].is_object()) return;
    const json& props = (*schema)["properties"];
    for (const char* field : {"name", "generateName"}) {
      if (props.contains(field) && metadata.contains(field)) {
        check(props[field], metadata[field], std::string("metadata.") + field, false);
      }
    }
  }

  void check_combinators(const json& schema, const json& value, const std::string& path, bool at_resource_root) {
    // Branches of a structural schema only add value validations; unknown fields are judged by the outer schema.
    ValidateOptions branch_options = options_;
    branch_options.unknown_fields = UnknownFields::kPrune;
    auto branch_errors = [&](const json& branch) {
      Validator inner(branch_options);
      inner.check(branch, value, path, at_resource_root);
      return inner.take();
    };
    if (auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
      for (const auto& branch : *all) {
        for (auto& e : branch_errors(branch)) errors_.push_back(std::move(e));
      }
    }
    if (auto any = schema.find("anyOf"); any != schema.end() && any->is_array()) {
      bool matched = false;
      for (const auto& branch : *any) matched = matched || branch_errors(branch).empty();
      if (!matched) add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": must match anyOf");
    }
    if (auto one = schema.find("oneOf"); one != schema.end() && one->is_array()) {
      int matched = 0;
      for (const auto& branch : *one) matched += branch_errors(branch).empty() ? 1 : 0;
      if (matched != 1) {
        add(path, ErrorKind::kInvalid,
            "Invalid value: " + compact(value) + ": must match exactly one of oneOf, matched " +
                std::to_string(matched));
      }
    }
    if (auto n = schema.find("not"); n != schema.end() && n->is_object() && branch_errors(*n).empty()) {
      add(path, ErrorKind::kInvalid, "Invalid value: " + compact(value) + ": must not match 'not'");
    }
  }

  ValidateOptions options_;
  std::vector<SchemaError> errors_;
};

json prune(const json& schema, const json& value, bool at_resource_root) {
  if (!schema.is_object()) return value;
  if (value.is_object()) {
    const auto props = schema.find("properties");
    const auto additional = schema.find("additionalProperties");
    json out = json::object();
    for (const auto& [key, child] : value.items()) {
      if (at_resource_root && key == "metadata") {
        out[key] = child;  // ObjectMeta is never pruned by a CRD schema
      } else if (props != schema.end() && props->is_object() && props->contains(key)) {
        const json& child_schema = (*props)[key];
        if (child.is_null() && !flag(child_schema, "nullable")) continue;
        out[key] = prune(child_schema, child, false);
      } else if (additional != schema.end() && additional->is_object()) {
        out[key] = prune(*additional, child, false);
      } else if (is_known_field(schema, key, at_resource_root) || preserves_unknown(schema) ||
                 (additional != schema.end() && additional->is_boolean() && additional->get<bool>())) {
        out[key] = child;
      }
    }
    return out;
  }
  if (value.is_array()) {
    auto items = schema.find("items");
    if (items == schema.end() || !items->is_object()) return value;
    json out = json::array();
    for (const auto& item : value) out.push_back(prune(*items, item, false));
    return out;
  }
  return value;
}

json defaulted(const json& schema, const json& value) {
  if (!schema.is_object()) return value;
  json out = value;
  if (out.is_object()) {
    if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
      for (const auto& [key, child_schema] : props->items()) {
        if (!out.contains(key) && child_schema.contains("default")) out[key] = child_schema["default"];
        if (out.contains(key)) out[key] = defaulted(child_schema, out[key]);
      }
    }
    if (auto additional = schema.find("additionalProperties"); additional != schema.end() && additional->is_object()) {
      for (auto& [key, child] : out.items()) child = defaulted(*additional, child);
    }
  } else if (out.is_array()) {
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) {
      for (auto& item : out) item = defaulted(*items, item);
    }
  }
  return out;
}

const std::set<std::string> kTypes = {"object", "array", "string", "integer", "number", "boolean"};

void check_structural(const json& schema, const std::string& path, bool in_combinator, std::vector<std::string>& out) {
  if (!schema.is_object()) {
    out.push_back(path + ": must be a schema object");
    return;
  }
  auto t = schema.find("type");
  const bool typeless_ok = preserves_unknown(schema) || flag(schema, "x-kubernetes-int-or-string") || in_combinator;
  if (t == schema.end()) {
    if (!typeless_ok) out.push_back(path + ".type: Required value: must not be empty for specified object fields");
  } else if (!t->is_string() || !kTypes.count(t->get<std::string>())) {
    out.push_back(path + ".type: Unsupported value: " + compact(*t));
  } else if (in_combinator) {
    out.push_back(path + ".type: Forbidden: must be empty to be structural (inside allOf/anyOf/oneOf/not)");
  }
  if (schema.contains("properties") && schema.contains("additionalProperties")) {
    out.push_back(path + ": properties and additionalProperties are mutually exclusive");
  }
  if (t != schema.end() && t->is_string() && *t == "array" && !schema.contains("items")) {
    out.push_back(path + ".items: Required value: must be specified for arrays");
  }
  if (flag(schema, "x-kubernetes-int-or-string") && t != schema.end()) {
    out.push_back(path + ".type: Forbidden: must be empty when x-kubernetes-int-or-string is true");
  }
  for (const char* forbidden : {"$ref", "definitions", "dependencies", "patternProperties", "additionalItems"}) {
    if (schema.contains(forbidden)) out.push_back(path + "." + forbidden + ": Forbidden: not allowed in a CRD schema");
  }
  if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
    for (const auto& [key, child] : props->items()) {
      check_structural(child, path + ".properties[" + key + "]", in_combinator, out);
    }
  }
  if (auto items = schema.find("items"); items != schema.end())
    check_structural(*items, path + ".items", in_combinator, out);
  if (auto add = schema.find("additionalProperties"); add != schema.end() && add->is_object()) {
    check_structural(*add, path + ".additionalProperties", in_combinator, out);
  }
  for (const char* combinator : {"allOf", "anyOf", "oneOf"}) {
    if (auto list = schema.find(combinator); list != schema.end() && list->is_array()) {
      for (size_t i = 0; i < list->size(); ++i) {
        check_structural((*list)[i], path + "." + combinator + item_path("", i), true, out);
      }
    }
  }
  if (auto n = schema.find("not"); n != schema.end()) check_structural(*n, path + ".not", true, out);
}

}  // namespace

std::string SchemaError::to_string() const { return (path.empty() ? std::string("<root>") : path) + ": " + message; }

std::vector<SchemaError> validate(const json& schema, const json& value, const ValidateOptions& options) {
  Validator validator(options);
  validator.check(schema, value, "", options.root == RootKind::kResource);
  return validator.take();
}

std::vector<std::string> validate_against_schema(const json& schema, const json& value) {
  std::vector<std::string> out;
  for (const auto& e : validate(schema, value)) out.push_back(e.to_string());
  return out;
}

json prune_unknown_fields(const json& schema, const json& value, RootKind root) {
  return prune(schema, value, root == RootKind::kResource);
}

json apply_defaults(const json& schema, const json& value) { return defaulted(schema, value); }

std::vector<std::string> structural_errors(const json& schema) {
  std::vector<std::string> out;
  check_structural(schema, "openAPIV3Schema", false, out);
  return out;
}

const json& crd_version_schema(const json& crd, const std::string& version) {
  const auto spec = crd.find("spec");
  if (spec == crd.end() || !spec->is_object() || !spec->contains("versions") || !(*spec)["versions"].is_array()) {
    throw InvalidArgument("CRD: spec.versions: expected a list of versions");
  }
  for (const auto& v : (*spec)["versions"]) {
    const bool wanted = version.empty() ? v.value("storage", false) : v.value("name", "") == version;
    if (!wanted) continue;
    const auto schema = v.find("schema");
    if (schema == v.end() || !schema->contains("openAPIV3Schema")) {
      throw InvalidArgument("CRD: version " + v.value("name", "?") + ": schema.openAPIV3Schema is missing");
    }
    return (*schema)["openAPIV3Schema"];
  }
  throw InvalidArgument("CRD: no version named '" + (version.empty() ? "<storage>" : version) + "'");
}

}  // namespace torus::openapi

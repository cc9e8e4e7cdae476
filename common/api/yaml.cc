#include "common/api/yaml.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <regex>
#include <vector>

namespace torus::api {
namespace {

using json = nlohmann::json;

std::string join(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// `digits` (no sign, no prefix) in `base` as an int64; beyond int64 the nearest double (as Go's YAML decoder does).
json integer(std::string_view digits, int base, bool negative) {
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1u : 0u);
  if (ec == std::errc() && end == digits.data() + digits.size() && magnitude <= limit) {
    if (!negative) return static_cast<int64_t>(magnitude);
    return magnitude == limit ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(magnitude);
  }
  double value = 0.0;
  if (base == 8) {  // from_chars reads no octal floats; times 8 is exact, so only the additions round
    for (char c : digits) value = value * 8 + (c - '0');
  } else {
    std::from_chars(digits.data(), digits.data() + digits.size(), value,
                    base == 16 ? std::chars_format::hex : std::chars_format::general);
  }
  return negative ? -value : value;
}

json scalar_to_json(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  const std::string& text = node.Scalar();
  // "!" marks a quoted or block scalar: always a string. "?" is a plain scalar to be resolved.
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return text;
  return resolve_plain_scalar(text);
}

SourcePosition position_of(const YAML::Mark& mark) { return {mark.line + 1, mark.column + 1}; }

json yaml_to_json_at(const YAML::Node& node, const std::string& path, FieldErrors& errors, SourceMap* sources) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(node);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        const std::string child = path + "[" + std::to_string(i) + "]";
        if (sources) sources->add(child, position_of(node[i].Mark()));
        out.push_back(yaml_to_json_at(node[i], child, errors, sources));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      std::map<std::string, int> first_line;
      for (const auto& entry : node) {
        const SourcePosition at = position_of(entry.first.Mark());
        if (!entry.first.IsScalar()) {
          errors.push_back({path, "map keys must be strings", at.line, at.column});
          continue;
        }
        const std::string key = entry.first.Scalar();
        const std::string child = join(path, key);
        if (out.contains(key)) {
          errors.push_back({child, "duplicate field (first given on line " + std::to_string(first_line[key]) + ")",
                            at.line, at.column});
          continue;
        }
        first_line[key] = at.line;
        if (sources) sources->add(child, at);
        out[key] = yaml_to_json_at(entry.second, child, errors, sources);
      }
      return out;
    }
    default:
      return nullptr;
  }
}

// Plain scalars YAML 1.1 readers (kubectl, Go's yaml.v2) take for booleans or numbers, though YAML 1.2 does not.
bool yaml11_special(const std::string& s) {
  static const std::regex kWords("^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$");
  static const std::regex kNumberLike("^[-+]?[0-9.][0-9_:.eE+-]*$");
  return std::regex_match(s, kWords) || std::regex_match(s, kNumberLike);
}

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  if (!resolve_plain_scalar(s).is_string() || yaml11_special(s)) return true;
  // Leading indicators and ": " / " #" would change the meaning of a plain scalar.
  if (std::string_view("-?:,[]{}#&*!|>'\"%@`").find(s.front()) != std::string_view::npos) return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return true;
  return s.back() == ' ' || s.back() == ':' || s.front() == ' ' || s.find('\n') != std::string::npos;
}

void emit_json(YAML::Emitter& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, child] : value.items()) {
        out << YAML::Key;
        if (needs_quotes(key)) out << YAML::DoubleQuoted;
        out << key << YAML::Value;
        emit_json(out, child);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& child : value) emit_json(out, child);
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      if (needs_quotes(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case json::value_t::null:
      out << YAML::Null;
      return;
    default:
      // nlohmann prints the shortest text that reads back to the same number; floats keep their ".0".
      out << value.dump();
      return;
  }
}

}  // namespace

json resolve_plain_scalar(const std::string& s) {
  static const std::regex kInt(R"(^[-+]?[0-9]+$)");
  static const std::regex kOct(R"(^0o[0-7]+$)");
  static const std::regex kHex(R"(^0x[0-9a-fA-F]+$)");
  static const std::regex kFloat(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (std::regex_match(s, kInt)) {
    const bool signed_text = s[0] == '+' || s[0] == '-';
    return integer(std::string_view(s).substr(signed_text ? 1 : 0), 10, s[0] == '-');
  }
  if (std::regex_match(s, kOct)) return integer(std::string_view(s).substr(2), 8, false);
  if (std::regex_match(s, kHex)) return integer(std::string_view(s).substr(2), 16, false);
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return s;
}

json yaml_to_json(const YAML::Node& node, FieldErrors& errors, SourceMap* sources) {
  if (sources) sources->add("", position_of(node.Mark()));
  return yaml_to_json_at(node, "", errors, sources);
}

json parse_yaml_document(std::string_view text, FieldErrors& errors, SourceMap* sources) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    errors.push_back({"", "malformed YAML: " + e.msg, e.mark.line + 1, e.mark.column + 1});
    return nullptr;
  }
  if (documents.size() != 1) {
    errors.push_back({"", "expected exactly one YAML document, found " + std::to_string(documents.size())});
    return nullptr;
  }
  return yaml_to_json(documents.front(), errors, sources);
}

std::string json_to_yaml(const json& value) {
  YAML::Emitter out;
  emit_json(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace torus::api

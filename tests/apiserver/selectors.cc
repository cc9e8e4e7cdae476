#include "tests/apiserver/selectors.h"

#include <cctype>

#include "tests/apiserver/api_error.h"

namespace torus::standin {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Splits on commas that are not inside parentheses: "a in (x,y),b" -> {"a in (x,y)", "b"}.
std::vector<std::string> split_requirements(const std::string& text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(trim(current));
  return parts;
}

bool valid_label_value(const std::string& v) {
  if (v.size() > 63) return false;
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  return v.empty() ||
         (std::isalnum(static_cast<unsigned char>(v.front())) && std::isalnum(static_cast<unsigned char>(v.back())));
}

bool valid_label_key(const std::string& key) {
  auto slash = key.find('/');
  std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  if (slash != std::string::npos && (slash == 0 || slash > 253)) return false;
  return !name.empty() && valid_label_value(name);
}

[[noreturn]] void unparsable(const std::string& requirement, const std::string& why) {
  throw bad_request("unable to parse requirement: " + why + " in \"" + requirement + "\"");
}

std::vector<std::string> parse_set(const std::string& requirement, const std::string& rest) {
  std::string body = trim(rest);
  if (body.size() < 2 || body.front() != '(' || body.back() != ')') unparsable(requirement, "expected ( values )");
  std::vector<std::string> values;
  std::string inner = body.substr(1, body.size() - 2);
  size_t start = 0;
  while (start <= inner.size()) {
    size_t comma = inner.find(',', start);
    std::string v = trim(inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!valid_label_value(v)) unparsable(requirement, "invalid label value: \"" + v + "\"");
    values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

// "key in (a,b)" / "key notin (a)": the keyword must stand as its own word after the key.
bool parse_set_requirement(const std::string& r, LabelRequirement& out) {
  for (auto [word, op] : {std::pair{" notin ", LabelOp::kNotIn}, std::pair{" in ", LabelOp::kIn}}) {
    std::string spaced = r;
    auto paren = spaced.find('(');
    auto at = spaced.find(word);
    if (at == std::string::npos || (paren != std::string::npos && at > paren)) continue;
    out.key = trim(r.substr(0, at));
    out.op = op;
    out.values = parse_set(r, r.substr(at + std::string(word).size()));
    return true;
  }
  return false;
}

LabelRequirement parse_requirement(const std::string& r) {
  LabelRequirement req;
  if (r.empty()) unparsable(r, "found '', expected: identifier");
  if (r[0] == '!') {
    req.key = trim(r.substr(1));
    req.op = LabelOp::kDoesNotExist;
  } else if (parse_set_requirement(r, req)) {
  } else {
    struct OpText {
      const char* text;
      LabelOp op;
    };
    // Longest operators first so "==" is not read as "=".
    static const OpText ops[] = {{"!=", LabelOp::kNotEquals},
                                 {"==", LabelOp::kEquals},
                                 {"=", LabelOp::kEquals},
                                 {">", LabelOp::kGreaterThan},
                                 {"<", LabelOp::kLessThan}};
    bool found = false;
    for (const OpText& op : ops) {
      auto at = r.find(op.text);
      if (at == std::string::npos) continue;
      req.key = trim(r.substr(0, at));
      req.op = op.op;
      std::string value = trim(r.substr(at + std::string(op.text).size()));
      if (!valid_label_value(value)) unparsable(r, "invalid label value: \"" + value + "\"");
      if ((op.op == LabelOp::kGreaterThan || op.op == LabelOp::kLessThan) &&
          value.find_first_not_of("0123456789") != std::string::npos) {
        unparsable(r, "for 'Gt', 'Lt' operators, the value must be an integer");
      }
      req.values = {value};
      found = true;
      break;
    }
    if (!found) {
      req.key = r;
      req.op = LabelOp::kExists;
    }
  }
  if (!valid_label_key(req.key)) unparsable(r, "invalid label key \"" + req.key + "\"");
  return req;
}

bool label_matches(const LabelRequirement& req, const nlohmann::json& labels) {
  bool has = labels.is_object() && labels.contains(req.key) && labels[req.key].is_string();
  std::string value = has ? labels[req.key].get<std::string>() : "";
  auto in_values = [&] {
    for (const std::string& v : req.values) {
      if (v == value) return true;
    }
    return false;
  };
  switch (req.op) {
    case LabelOp::kEquals:
    case LabelOp::kIn:
      return has && in_values();
    case LabelOp::kNotEquals:
    case LabelOp::kNotIn:
      return !has || !in_values();
    case LabelOp::kExists:
      return has;
    case LabelOp::kDoesNotExist:
      return !has;
    case LabelOp::kGreaterThan:
    case LabelOp::kLessThan: {
      if (!has || value.empty() || value.find_first_not_of("0123456789") != std::string::npos) return false;
      long long have = std::stoll(value);
      long long want = std::stoll(req.values[0]);
      return req.op == LabelOp::kGreaterThan ? have > want : have < want;
    }
  }
  return false;
}

// Follows a dotted path ("involvedObject.uid") through nested objects; "" when absent.
std::string field_value(const nlohmann::json& object, const std::string& path) {
  const nlohmann::json* at = &object;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (at->is_string()) return at->get<std::string>();
  if (at->is_null()) return "";
  return at->dump();
}

}  // namespace

LabelSelector LabelSelector::parse(const std::string& text) {
  LabelSelector selector;
  if (trim(text).empty()) return selector;
  for (const std::string& r : split_requirements(text)) selector.requirements_.push_back(parse_requirement(r));
  return selector;
}

bool LabelSelector::matches(const nlohmann::json& labels) const {
  for (const LabelRequirement& req : requirements_) {
    if (!label_matches(req, labels)) return false;
  }
  return true;
}

FieldSelector FieldSelector::parse(const std::string& text, const std::vector<std::string>& supported) {
  FieldSelector selector;
  if (trim(text).empty()) return selector;
  for (const std::string& r : split_requirements(text)) {
    FieldRequirement req;
    size_t at = std::string::npos;
    size_t width = 0;
    if ((at = r.find("!=")) != std::string::npos) {
      req.negated = true;
      width = 2;
    } else if ((at = r.find("==")) != std::string::npos) {
      width = 2;
    } else if ((at = r.find('=')) != std::string::npos) {
      width = 1;
    } else {
      throw bad_request("invalid selector: '" + text + "'; can't understand '" + r + "'");
    }
    req.field = trim(r.substr(0, at));
    req.value = trim(r.substr(at + width));
    bool known = false;
    for (const std::string& f : supported) known = known || f == req.field;
    if (!known) throw bad_request("field label not supported: " + req.field);
    selector.requirements_.push_back(req);
  }
  return selector;
}

bool FieldSelector::matches(const nlohmann::json& object) const {
  for (const FieldRequirement& req : requirements_) {
    bool equal = field_value(object, req.field) == req.value;
    if (equal == req.negated) return false;
  }
  return true;
}

std::string FieldSelector::equality_value(const std::string& field) const {
  for (const FieldRequirement& req : requirements_) {
    if (req.field == field && !req.negated) return req.value;
  }
  return "";
}

std::vector<std::string> supported_fields(const std::string& group_resource) {
  std::vector<std::string> fields = {"metadata.name", "metadata.namespace"};
  if (group_resource == "pods") {
    for (const char* f : {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                          "status.phase", "status.podIP", "status.nominatedNodeName"}) {
      fields.push_back(f);
    }
  } else if (group_resource == "events") {
    for (const char* f : {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                          "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                          "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}) {
      fields.push_back(f);
    }
  } else if (group_resource == "secrets") {
    fields.push_back("type");
  } else if (group_resource == "namespaces") {
    fields.push_back("status.phase");
  } else if (group_resource == "nodes") {
    fields.push_back("spec.unschedulable");
  }
  return fields;
}

}  // namespace torus::standin

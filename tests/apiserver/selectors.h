#pragma once
// Label selectors (`a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3`) and field selectors (`metadata.name=x`) as the
// apiserver parses and matches them. Parse errors throw ApiError 400 with the apiserver's wording.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

enum class LabelOp { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist, kGreaterThan, kLessThan };

struct LabelRequirement {
  std::string key;
  LabelOp op;
  std::vector<std::string> values;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything
  static LabelSelector parse(const std::string& text);
  bool matches(const nlohmann::json& labels) const;  // labels: object of strings, or null
  bool empty() const { return requirements_.empty(); }

 private:
  std::vector<LabelRequirement> requirements_;
};

struct FieldRequirement {
  std::string field;  // dotted path, e.g. "metadata.name", "spec.nodeName", "involvedObject.uid"
  bool negated = false;
  std::string value;
};

class FieldSelector {
 public:
  FieldSelector() = default;
  // `supported` lists the fields this resource can be selected by (the apiserver refuses any other field).
  static FieldSelector parse(const std::string& text, const std::vector<std::string>& supported);
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }
  // The value required for `field` with `=`, or "" (lets a watch on one name skip other objects cheaply).
  std::string equality_value(const std::string& field) const;

 private:
  std::vector<FieldRequirement> requirements_;
};

// The field selectors a resource supports: metadata.name and metadata.namespace everywhere, plus per kind ones.
std::vector<std::string> supported_fields(const std::string& group_resource);

}  // namespace torus::standin

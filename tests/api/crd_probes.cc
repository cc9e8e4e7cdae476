#include "tests/api/crd_probes.h"

#include <cstdint>
#include <limits>
#include <string>

namespace torus::api::testing {
namespace {

using json = nlohmann::json;
using Pointer = json::json_pointer;

std::string type_of(const json& schema) { return schema.value("type", ""); }

bool has_number(const json& schema, const char* key) { return schema.contains(key) && schema[key].is_number(); }

// A value of the item type, for lists built to a length (the validators decide whether it is a valid item).
json sample_item(const json& items) {
  const std::string t = type_of(items);
  if (items.contains("enum") && !items["enum"].empty()) return items["enum"][0];
  if (t == "integer" || t == "number") return has_number(items, "minimum") ? items["minimum"] : json(8);
  if (t == "string") return "a";
  if (t == "boolean") return true;
  if (t == "array") return json::array();
  return json::object();
}

// Values worth trying in a field of `schema`: each type's wrong types, null, and the schema's own boundaries.
std::vector<json> values_for(const json& schema) {
  std::vector<json> v = {nullptr};
  const std::string t = type_of(schema);
  if (schema.value("x-kubernetes-preserve-unknown-fields", false)) {
    v.insert(v.end(), {json::object(), json{{"anything", {{"goes", 1}}}}, "x", json::array({1, 2})});
    return v;
  }
  if (t == "integer") {
    v.insert(v.end(), {0, -1, 1, 1.5, "1", true});
    if (has_number(schema, "minimum")) {
      const int64_t m = schema["minimum"].get<int64_t>();
      v.insert(v.end(), {m - 1, m, m + 1});
    }
    if (has_number(schema, "maximum")) {
      const int64_t m = schema["maximum"].get<int64_t>();
      v.insert(v.end(), {m - 1, m, m + 1});
    }
    const std::string format = schema.value("format", "");
    if (format == "int32") v.insert(v.end(), {INT32_MAX, int64_t{INT32_MAX} + 1, int64_t{INT32_MIN} - 1});
    if (format == "int64") {
      v.insert(v.end(), {std::numeric_limits<int64_t>::max(), uint64_t{1} << 63});
    }
  } else if (t == "number") {
    v.insert(v.end(), {0, -1, 0.5, 1, 2.5, "0.5", true});
    for (const char* bound : {"minimum", "maximum"}) {
      if (!has_number(schema, bound)) continue;
      const double m = schema[bound].get<double>();
      v.insert(v.end(), {m - 0.5, m, m + 0.5});
    }
  } else if (t == "string") {
    v.insert(v.end(), {"", "x", 7, true, json::object()});
    if (schema.contains("enum")) {
      for (const json& e : schema["enum"]) v.push_back(e);
      v.insert(v.end(), {"Bogus", "RING"});
    }
    if (schema.contains("pattern")) v.insert(v.end(), {"Bad_Value", "ok-value", "a/b", "-a", "a.b/c-d"});
    if (has_number(schema, "maxLength")) {
      const size_t m = schema["maxLength"].get<size_t>();
      v.insert(v.end(), {std::string(m, 'a'), std::string(m + 1, 'a')});
      std::string runes;  // two bytes each: the limit counts characters
      for (size_t i = 0; i < m; ++i) runes += "\xc3\xa9";
      v.push_back(runes);
    }
    if (has_number(schema, "minLength")) {
      const size_t m = schema["minLength"].get<size_t>();
      if (m > 0) v.push_back(std::string(m - 1, 'a'));
      v.push_back(std::string(m, 'a'));
    }
    if (schema.value("format", "") == "date-time") {
      v.insert(v.end(),
               {"2026-11-22T06:00:00Z", "2026-11-22T06:00:00.123456+01:00", "2026-11-22", "2026-11-22T06:00:00",
                "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-22T25:00:00Z", "yesterday",
                "2026-11-22 06:00:00Z", "2026-11-22t06:00:00z", "2026-11-22T06:00:60Z", "2028-02-29T00:00:00Z"});
    }
  } else if (t == "boolean") {
    v.insert(v.end(), {true, false, "true", 1});
  } else if (t == "array") {
    v.insert(v.end(), {json::array(), "x", json::object()});
    const json items = schema.value("items", json::object());
    const json item = sample_item(items);
    for (const char* bound : {"minItems", "maxItems"}) {
      if (!has_number(schema, bound)) continue;
      const int64_t m = schema[bound].get<int64_t>();
      for (int64_t n : {m - 1, m, m + 1}) {
        if (n >= 0) v.push_back(json(std::vector<json>(static_cast<size_t>(n), item)));
      }
    }
    v.push_back(json::array({type_of(items) == "string" ? json(7) : json("x")}));
    v.push_back(json::array({nullptr}));
  } else if (t == "object") {
    v.insert(v.end(), {json::object(), "x", json::array({1})});
  }
  return v;
}

class Walker {
 public:
  Walker(const json& base, std::vector<Probe>& out) : base_(base), out_(out) {}

  void walk(const json& schema, const Pointer& at, const std::string& path) {
    for (const json& value : values_for(schema)) {
      json doc = base_;
      doc[at] = value;
      out_.push_back({path + " = " + value.dump(), std::move(doc)});
    }
    if (base_.contains(at)) {
      json doc = base_;
      json& parent = doc[at.parent_pointer()];
      if (parent.is_array()) {
        parent.erase(std::stoul(at.back()));
      } else {
        parent.erase(at.back());
      }
      out_.push_back({path + " removed", std::move(doc)});
    }
    if (schema.value("x-kubernetes-preserve-unknown-fields", false)) return;
    const std::string t = type_of(schema);
    if (t == "object") walk_object(schema, at, path);
    if (t == "array" && schema.contains("items")) walk_array(schema, at, path);
  }

 private:
  void walk_object(const json& schema, const Pointer& at, const std::string& path) {
    json unknown = base_;
    unknown[at / "bogusField"] = 1;  // beside the fields it has (or alone, when the object was missing)
    out_.push_back({path + ".bogusField = 1", std::move(unknown)});
    if (schema.contains("properties")) {
      for (const auto& [name, sub] : schema["properties"].items()) walk(sub, at / name, path + "." + name);
    }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object()) {
      walk(schema["additionalProperties"], at / "someKey", path + "[someKey]");
    }
  }

  void walk_array(const json& schema, const Pointer& at, const std::string& path) {
    walk(schema["items"], at / 0, path + "[0]");
    // A list type's uniqueness: the first item again (only where the base has one to repeat).
    if (schema.contains("x-kubernetes-list-type") && base_.contains(at) && base_[at].is_array() && !base_[at].empty()) {
      json doc = base_;
      doc[at].push_back(doc[at][0]);
      out_.push_back({path + " with its first item twice", std::move(doc)});
      if (schema.contains("x-kubernetes-list-map-keys") && doc[at][0].is_object()) {
        json distinct = base_;  // the same item under another key is not a duplicate
        json copy = distinct[at][0];
        for (const json& key : schema["x-kubernetes-list-map-keys"]) copy[key.get<std::string>()] = "AnotherKey";
        distinct[at].push_back(copy);
        out_.push_back({path + " with a second item of another key", std::move(distinct)});
      }
    }
  }

  const json& base_;
  std::vector<Probe>& out_;
};

}  // namespace

std::vector<Probe> schema_probes(const nlohmann::json& schema, const nlohmann::json& base, const std::string& root) {
  std::vector<Probe> out;
  Walker(base, out).walk(schema["properties"][root], Pointer("/" + root), root);
  return out;
}

std::vector<Probe> envelope_probes(const nlohmann::json& base) {
  std::vector<Probe> out;
  for (const json& name :
       {json("a"), json(std::string(48, 'a')), json(std::string(49, 'a')), json("Bad_Name"),
        json("9-starts-with-a-digit"), json("ends-with-"), json("has.dot"), json(""), json(7), json(nullptr)}) {
    json doc = base;
    doc["metadata"]["name"] = name;
    out.push_back({"metadata.name = " + name.dump(), std::move(doc)});
  }
  json nameless = base;
  nameless["metadata"].erase("name");
  out.push_back({"metadata.name removed", std::move(nameless)});
  json labelled = base;  // ObjectMeta's own fields are the apiserver's to check, not the schema's
  labelled["metadata"]["labels"] = {{"team", "vision"}};
  labelled["metadata"]["annotations"] = {{"note", "x"}};
  out.push_back({"metadata.labels and annotations", std::move(labelled)});
  for (const char* api_version : {"torus.dev/v1", "torus.dev/v1beta1"}) {
    json doc = base;
    doc["apiVersion"] = api_version;
    out.push_back({std::string("apiVersion = ") + api_version, std::move(doc)});
  }
  json job = base;
  job["kind"] = "Job";
  out.push_back({"kind = Job", std::move(job)});
  json unknown = base;
  unknown["bogusTopLevel"] = 1;
  out.push_back({"bogusTopLevel = 1", std::move(unknown)});
  return out;
}

}  // namespace torus::api::testing

// The schema checker is itself tested: the CRD agreement test is only as good as it is.
#include "tests/support/openapi_schema.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace torus::openapi {
namespace {

const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "required": ["workers"],
      "properties": {
        "workers": {"type": "integer", "minimum": 1, "format": "int32"},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMaximum": true},
        "mode": {"type": "string", "enum": ["ring", "torus2d"], "default": "ring"},
        "name": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "port": {"x-kubernetes-int-or-string": true},
        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "note": {"type": "string", "nullable": true}
      }
    }
  }
})");

bool has(const std::vector<std::string>& errors, const std::string& text) {
  return std::find(errors.begin(), errors.end(), text) != errors.end();
}

TEST(OpenApiSchema, AcceptsAValidResource) {
  const json v = json::parse(R"({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
    "spec": {"workers": 2, "ratio": 0.5, "mode": "ring", "name": "abc", "tags": ["t"], "labels": {"a": "b"},
             "port": "http", "template": {"anything": {"goes": 1}}, "note": null}})");
  EXPECT_TRUE(validate_against_schema(kSchema, v).empty())
      << ::testing::PrintToString(validate_against_schema(kSchema, v));
}

TEST(OpenApiSchema, ReportsEveryErrorWithItsPath) {
  const json v = json::parse(R"({"spec": {"ratio": 1, "mode": "mesh", "name": "ABCDEFGHIJ", "tags": [],
    "labels": {"a": 1}, "port": 1.5, "extra": true, "workers2": 3}})");
  const auto errors = validate_against_schema(kSchema, v);
  EXPECT_TRUE(has(errors, "spec.workers: Required value"));
  EXPECT_TRUE(has(errors, "spec.ratio: Invalid value: 1: should be less than 1"));
  EXPECT_TRUE(has(errors, "spec.mode: Unsupported value: \"mesh\": supported values: \"ring\", \"torus2d\""));
  EXPECT_TRUE(has(errors, "spec.name: Too long: may not be longer than 8"));
  EXPECT_TRUE(has(errors, "spec.name: Invalid value: \"ABCDEFGHIJ\": should match '^[a-z]+$'"));
  EXPECT_TRUE(has(errors, "spec.tags: Invalid value: 0: should have at least 1 items"));
  EXPECT_TRUE(has(errors, "spec.labels[a]: Invalid value: 1: must be of type string, got integer"));
  EXPECT_TRUE(has(errors, "spec.port: Invalid value: 1.5: must be an integer or a string"));
  EXPECT_TRUE(has(errors, "spec.extra: unknown field"));
  EXPECT_TRUE(has(errors, "spec.workers2: unknown field"));
  EXPECT_EQ(errors.size(), 10u) << ::testing::PrintToString(errors);
}

TEST(OpenApiSchema, IntegerTypeAndFormatRanges) {
  EXPECT_FALSE(validate_against_schema(kSchema, json::parse(R"({"spec": {"workers": 2.0}})")).empty());
  EXPECT_FALSE(validate_against_schema(kSchema, json::parse(R"({"spec": {"workers": 3000000000}})")).empty());
  EXPECT_FALSE(validate_against_schema(kSchema, json::parse(R"({"spec": {"workers": 0}})")).empty());
  EXPECT_FALSE(validate_against_schema(kSchema, json::parse(R"({"spec": {"workers": null}})")).empty());
}

// Found by crd_oracle_test.cc against jsonschema: a date-time is a calendar date and a time of day, not just digits.
TEST(OpenApiSchema, DateTimesAreCalendarDatesAndTimesOfDay) {
  const json schema =
      json::parse(R"({"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}})");
  auto ok = [&](const char* t) { return validate_against_schema(schema, json{{"t", t}}).empty(); };
  EXPECT_TRUE(ok("2026-11-22T06:00:00Z"));
  EXPECT_TRUE(ok("2026-11-22t06:00:00.123456+01:00"));
  EXPECT_TRUE(ok("2028-02-29T00:00:00Z"));
  EXPECT_FALSE(ok("2026-02-29T00:00:00Z"));
  EXPECT_FALSE(ok("2026-13-01T00:00:00Z"));
  EXPECT_FALSE(ok("2026-11-22T24:00:00Z"));
  EXPECT_FALSE(ok("2026-11-22T06:00:60Z"));
  EXPECT_FALSE(ok("2026-11-22 06:00:00Z"));
  EXPECT_FALSE(ok("2026-11-22T06:00:00"));
}

// Found by crd_oracle_test.cc: x-kubernetes-list-type map keeps one item per key, set one per value.
TEST(OpenApiSchema, ListTypesRefuseDuplicates) {
  const json schema = json::parse(R"({"type": "object", "properties": {
    "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                   "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}},
    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}})");
  const auto errors = validate_against_schema(schema, json::parse(R"({
    "conditions": [{"type": "Ready", "status": "True"}, {"type": "Running"}, {"type": "Ready", "status": "False"}],
    "tags": ["a", "b", "a"]})"));
  EXPECT_EQ(errors, (std::vector<std::string>{"conditions[2]: Duplicate value: {\"type\":\"Ready\"}",
                                              "tags[2]: Duplicate value: \"a\""}));
  EXPECT_TRUE(
      validate_against_schema(schema, json::parse(R"({"conditions": [{"type": "A"}, {"type": "B"}]})")).empty());
}

TEST(OpenApiSchema, PrunesUnknownFieldsLikeTheApiserver) {
  const json v = json::parse(R"({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "junk": 1,
    "spec": {"workers": 1, "extra": 2, "template": {"kept": 3}, "labels": {"k": "v"}, "mode": null}})");
  const json pruned = prune_unknown_fields(kSchema, v);
  EXPECT_FALSE(pruned.contains("junk"));
  EXPECT_TRUE(pruned.contains("metadata"));
  EXPECT_FALSE(pruned["spec"].contains("extra"));
  EXPECT_FALSE(pruned["spec"].contains("mode"));  // null in a non-nullable field
  EXPECT_EQ(pruned["spec"]["template"]["kept"], 3);
  EXPECT_EQ(pruned["spec"]["labels"]["k"], "v");
  ValidateOptions prune_mode;
  prune_mode.unknown_fields = UnknownFields::kPrune;
  EXPECT_TRUE(validate(kSchema, pruned, prune_mode).empty());
}

TEST(OpenApiSchema, AppliesDefaults) {
  const json out = apply_defaults(kSchema, json::parse(R"({"spec": {"workers": 1}})"));
  EXPECT_EQ(out["spec"]["mode"], "ring");
}

TEST(OpenApiSchema, CombinatorsAndStructuralCheck) {
  const json schema =
      json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  EXPECT_TRUE(validate_against_schema(schema, json::parse(R"({"a": 1})")).empty());
  EXPECT_FALSE(validate_against_schema(schema, json::parse(R"({"a": 1, "b": 2})")).empty());
  EXPECT_FALSE(validate_against_schema(schema, json::parse(R"({})")).empty());
  EXPECT_TRUE(structural_errors(schema).empty());
  EXPECT_TRUE(structural_errors(kSchema).empty());
  const json bad = json::parse(R"({"type": "object", "properties": {"x": {"properties": {}}, "l": {"type": "array"}},
    "additionalProperties": {"type": "string"}})");
  EXPECT_EQ(structural_errors(bad).size(), 3u) << ::testing::PrintToString(structural_errors(bad));
}

}  // namespace
}  // namespace torus::openapi

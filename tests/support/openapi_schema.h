#pragma once
// Validation of JSON values against a Kubernetes *structural* OpenAPI v3 schema, the way kube-apiserver
// checks a custom resource (library target `torus_test_openapi`, depends on nlohmann_json only).
//
// Interface (namespace torus::openapi):
//   std::vector<std::string> validate_against_schema(const json& schema, const json& value);
//       Every error, one string each: "<path>: <message>", e.g.
//         "spec.training.batchSize: Invalid value: -4: should be greater than or equal to 1"
//         "spec.gang.workers: Required value"
//         "spec.allReduce.algorithm: Unsupported value: \"mesh\": supported values: \"auto\", \"ring\""
//         "spec.training.batchSze: unknown field"
//       Empty when the value is valid. Unknown fields are reported (use validate() with kPrune to drop them).
//   std::vector<SchemaError> validate(const json& schema, const json& value, const ValidateOptions&);
//       Same, structured: {path, kind, message}. Paths: "spec.a.b", list items "spec.list[2].x", map entries
//       "spec.labels[key]". The root of a resource (RootKind::kResource) always admits apiVersion, kind and
//       metadata, as the apiserver does.
//   json prune_unknown_fields(const json& schema, const json& value, RootKind root = kResource);
//       The apiserver's pruning: drops fields the schema does not name (except under
//       x-kubernetes-preserve-unknown-fields) and nulls in non-nullable fields.
//   json apply_defaults(const json& schema, const json& value);
//       Fills `default`s of missing object properties (after pruning, as the apiserver does).
//   std::vector<std::string> structural_errors(const json& schema);
//       Why a schema is not structural (type missing, properties with additionalProperties, ...); empty if it is.
//   const json& crd_version_schema(const json& crd, const std::string& version = "");
//       The openAPIV3Schema of a CRD (already converted to JSON) for `version` (or the storage version);
//       throws torus::InvalidArgument when there is no such version or schema.
//
// Keywords: type (object/array/string/integer/number/boolean), properties, required, enum, minimum/maximum,
// exclusiveMinimum/exclusiveMaximum (OpenAPI v3 boolean form), multipleOf, minLength/maxLength, pattern (ECMAScript
// regex), minItems/maxItems, uniqueItems, items, additionalProperties (bool or schema), minProperties/maxProperties,
// nullable, format (int32, int64, date-time, byte), allOf/anyOf/oneOf/not, x-kubernetes-preserve-unknown-fields,
// x-kubernetes-int-or-string, x-kubernetes-embedded-resource, x-kubernetes-list-type set / map (with
// x-kubernetes-list-map-keys: duplicates refused). CEL rules (x-kubernetes-validations) are not
// evaluated.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::openapi {

using json = nlohmann::json;

enum class ErrorKind { kRequired, kType, kUnsupported, kInvalid, kUnknownField, kTooMany, kTooLong, kDuplicate };

struct SchemaError {
  std::string path;
  ErrorKind kind;
  std::string message;            // without the path
  std::string to_string() const;  // "<path>: <message>"
};

// Whether unknown fields are errors (kubectl --validate=strict) or dropped silently (the apiserver's default).
enum class UnknownFields { kReport, kPrune };
// A resource root admits apiVersion, kind and metadata without the schema naming them.
enum class RootKind { kResource, kPlain };

struct ValidateOptions {
  UnknownFields unknown_fields = UnknownFields::kReport;
  RootKind root = RootKind::kResource;
};

std::vector<SchemaError> validate(const json& schema, const json& value, const ValidateOptions& options = {});
std::vector<std::string> validate_against_schema(const json& schema, const json& value);

json prune_unknown_fields(const json& schema, const json& value, RootKind root = RootKind::kResource);
json apply_defaults(const json& schema, const json& value);

std::vector<std::string> structural_errors(const json& schema);

const json& crd_version_schema(const json& crd, const std::string& version = "");

}  // namespace torus::openapi

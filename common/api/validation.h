#pragma once
// Validation: every error at once, each naming its field path and what was expected:
//   spec.training.batchSize: must be a positive integer, got -4
// validate() is a pure function of the typed job and knows no lines; check_decoded() attaches each error's position
// in the YAML it was read from (Decoded::sources), so `torus validate` prints
//   job.yaml:12:5: spec.training.batchSize: must be a positive integer, got -4
// Field-local rules (types, enums, ranges, required fields) are the same in crds/trainingjobs.torus.dev.yaml;
// cross-field rules (batch divisible by world size, phases covering the epochs, torus grid = world size, ...) are
// only here. docs/trainingjob.md lists them all.
#include <string>

#include "common/api/codec.h"
#include "common/api/field_error.h"
#include "common/api/training_job.h"

namespace torus::api {

// Validates the job as it will run, i.e. with defaults applied (the job itself is not changed).
FieldErrors validate(const TrainingJob& job);

// Decode errors, then the validation errors that are not about a field that already failed to decode; each located
// through decoded.sources (the field's key, or for a missing field the map it is missing from).
FieldErrors check_decoded(const Decoded& decoded);
// Reads, decodes, defaults and validates a file: what `torus validate FILE` reports.
FieldErrors check_file(const std::string& path);

// The one call for programs that run a job (`torus run`, the worker): decoded, defaulted and valid, or
// torus::InvalidArgument listing every error as "FILE:line:column: path: message" ("FILE: path: message" for JSON).
TrainingJob load_job_file(const std::string& path);
TrainingJob load_job_yaml(std::string_view text, std::string_view source);

}  // namespace torus::api

#pragma once
// Where each field of a manifest was written, so that an error found later (validation runs on the typed job, which
// has no positions) can point at its line: a path -> position index built while the YAML is read. Values that came
// from elsewhere (`torus run --set spec.training.epochs=2`) are recorded with that origin instead.
//
//   decode_yaml(text)      -> Decoded{job, errors, sources}   (sources: "spec.training.batchSize" -> 12:5, ...)
//   validate(job)          -> "spec.training.batchSize: must be a positive integer, got -4"
//   sources.locate(errors) -> the same error at 12:5, printed as "job.yaml:12:5: spec.training.batchSize: ..."
#include <map>
#include <string>

#include "common/api/field_error.h"

namespace torus::api {

// A 1-based line and column in the source text.
struct SourcePosition {
  int line = 0;
  int column = 0;
  bool operator==(const SourcePosition&) const = default;
};

class SourceMap {
 public:
  // The field at `path` ("spec.training.phases[1]", "" for the document) was written at `position`: a map entry's
  // key, a list element's first character.
  void add(const std::string& path, SourcePosition position);
  // The value at `path` and everything under it came from `origin` ("--set spec.training.epochs") and not from the
  // file: what the file said there no longer counts.
  void override_with(const std::string& path, const std::string& origin);

  // Gives each error that has no position yet the one of its field; a field that is absent (a required field left
  // out) gets the position of its nearest ancestor present, i.e. the map it is missing from. An error about a value
  // from an override gets that origin. Errors about nothing this map knows are left as they are.
  void locate(FieldErrors& errors) const;
  void locate(FieldError& error) const;

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    SourcePosition position;
    std::string origin;  // non-empty: an override
  };
  // The first override strictly under `path`, if any (a map that exists only because an override wrote into it).
  const Entry* override_under(const std::string& path) const;

  std::map<std::string, Entry> entries_;  // by path, map keys written `a.key` (see canonical_path)
};

// Field paths name map entries as `labels[key]` and list elements as `phases[1]`; the source map names both map
// kinds alike (`labels.key`): this turns the first form into the second.
std::string canonical_path(const std::string& path);

}  // namespace torus::api

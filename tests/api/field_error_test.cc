// How a field error reads: where it points (an override's origin, else the file's line:column, else only the path),
// the document as a whole when there is no path, and every error at once in what throw_field_errors throws.
#include "common/api/field_error.h"

#include <gtest/gtest.h>

#include <string>

#include "common/util/error.h"

namespace torus::api {
namespace {

TEST(FieldError, PointsAtTheOriginElseTheFilePositionElseOnlyThePath) {
  FieldError e{"spec.training.epochs", "is required"};
  EXPECT_EQ(e.to_string(), "spec.training.epochs: is required");
  EXPECT_EQ(e.to_string("job.json"), "job.json: spec.training.epochs: is required") << "JSON has no positions";
  e.line = 4;
  e.column = 3;
  EXPECT_EQ(e.to_string(), "4:3: spec.training.epochs: is required");
  EXPECT_EQ(e.to_string("job.yaml"), "job.yaml:4:3: spec.training.epochs: is required");
  e.origin = "--set spec.training.epochs";
  EXPECT_EQ(e.to_string(), "--set spec.training.epochs: spec.training.epochs: is required");
  EXPECT_EQ(e.to_string("job.yaml"), "--set spec.training.epochs: spec.training.epochs: is required")
      << "an override replaces what the file said";
}

TEST(FieldError, AnErrorWithoutAPathIsTheDocuments) {
  const FieldError e{"", "a TrainingJob must be a map, got a list"};
  EXPECT_EQ(e.to_string(), "(document): a TrainingJob must be a map, got a list");
  EXPECT_EQ(e.to_string("job.yaml"), "job.yaml: a TrainingJob must be a map, got a list");
}

TEST(FieldError, ThrowFieldErrorsListsEveryErrorOnALineOfItsOwn) {
  const FieldErrors errors = {{"metadata.name", "is required", 1, 1}, {"spec.gang.workers", "must be >= 1, got 0"}};
  try {
    throw_field_errors(errors, "job.yaml");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "job.yaml:1:1: metadata.name: is required\njob.yaml: spec.gang.workers: must be >= 1, got 0");
  }
  try {
    throw_field_errors(errors, "");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "1:1: metadata.name: is required\nspec.gang.workers: must be >= 1, got 0");
  }
  EXPECT_THROW(throw_field_errors({}, "job.yaml"), InvalidArgument) << "no errors still means invalid";
}

}  // namespace
}  // namespace torus::api

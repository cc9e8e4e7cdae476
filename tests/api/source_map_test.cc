// Where an error points: overrides (--set) replace the file's positions below them; map keys written with dots.
#include "common/api/source_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace torus::api {
namespace {

TEST(SourceMap, OverridesReplaceWhatTheFileSaidBelowThem) {
  SourceMap sources;
  sources.add("", {1, 1});
  sources.add("spec", {3, 1});
  sources.add("spec.training", {4, 3});
  sources.add("spec.training.lrSchedule", {5, 5});
  sources.add("spec.training.lrSchedule.peak", {6, 7});
  sources.override_with("spec.training.lrSchedule", "--set spec.training.lrSchedule");
  sources.override_with("spec.trainng.epochs", "--set spec.trainng.epochs");
  FieldErrors errors = {{"spec.training.lrSchedule.peak", "must be a number in (0, inf), got -1"},
                        {"spec.training.lrSchedule.warmupEpochs", "is only for type one-cycle"},
                        {"spec.training.epochs", "is required"},
                        {"spec.trainng", "unknown field"},
                        {"metadata.name", "is required"}};
  sources.locate(errors);
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.to_string("job.yaml"));
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "--set spec.training.lrSchedule: spec.training.lrSchedule.peak: must be a number in (0, inf), "
                       "got -1",
                       "--set spec.training.lrSchedule: spec.training.lrSchedule.warmupEpochs: is only for type "
                       "one-cycle",
                       "job.yaml:4:3: spec.training.epochs: is required",
                       "--set spec.trainng.epochs: spec.trainng: unknown field",
                       "job.yaml:1:1: metadata.name: is required",
                   }));
}

TEST(SourceMap, CanonicalPathsWriteMapKeysWithDots) {
  EXPECT_EQ(canonical_path("metadata.labels[app.kubernetes.io/name]"), "metadata.labels.app.kubernetes.io/name");
  EXPECT_EQ(canonical_path("spec.training.phases[12].toEpoch"), "spec.training.phases[12].toEpoch");
  EXPECT_EQ(canonical_path("a[x][3]"), "a.x[3]");
}

}  // namespace
}  // namespace torus::api

// The CRD schema (what the apiserver enforces) and the C++ validator (what torus enforces) must agree: on every
// corpus file they reach the same verdict, except for cross-field rules only C++ can check (`# schema: accepts`).
// The schema side here is the stand-in's own checker (tests/support/openapi_schema.h); crd_oracle_test.cc checks that
// checker against an independent one (Python's jsonschema).
#include <gtest/gtest.h>

#include <algorithm>

#include "common/api/codec.h"
#include "common/api/validation.h"
#include "common/api/yaml.h"
#include "tests/api/corpus.h"
#include "tests/support/openapi_schema.h"

namespace torus::api {
namespace {

using nlohmann::json;

json load_yaml(const std::string& text, const std::string& name) {
  FieldErrors errors;
  json document = parse_yaml_document(text, errors);
  EXPECT_TRUE(errors.empty()) << name << ": " << (errors.empty() ? "" : errors[0].to_string());
  return document;
}

json crd() { return load_yaml(testing::read_text(testing::source_dir() / "crds/trainingjobs.torus.dev.yaml"), "crd"); }

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(CrdSchema, IsAStructuralSchemaWithTheExpectedShape) {
  const json c = crd();
  EXPECT_EQ(c["apiVersion"], "apiextensions.k8s.io/v1");
  EXPECT_EQ(c["kind"], "CustomResourceDefinition");
  EXPECT_EQ(c["metadata"]["name"], "trainingjobs.torus.dev");
  EXPECT_EQ(c["spec"]["group"], "torus.dev");
  EXPECT_EQ(c["spec"]["names"]["kind"], "TrainingJob");
  EXPECT_EQ(c["spec"]["names"]["shortNames"], json::array({"tj"}));
  const json& version = c["spec"]["versions"][0];
  EXPECT_EQ(version["name"], "v1alpha1");
  EXPECT_TRUE(version["subresources"].contains("status"));
  std::vector<std::string> columns;
  for (const auto& col : version["additionalPrinterColumns"]) columns.push_back(col["name"]);
  for (const char* wanted : {"Phase", "Ready", "Restarts", "Epoch", "Accuracy", "Images/s", "Age"}) {
    EXPECT_NE(std::find(columns.begin(), columns.end(), wanted), columns.end()) << wanted;
  }
  const json& schema = openapi::crd_version_schema(c, "v1alpha1");
  const auto problems = openapi::structural_errors(schema);
  EXPECT_TRUE(problems.empty()) << join(problems);
}

// Every enum of the C++ model is spelled the same in the schema.
TEST(CrdSchema, EnumsMatchTheCppModel) {
  const json c = crd();
  const json& spec = openapi::crd_version_schema(c)["properties"]["spec"]["properties"];
  auto names = [](const auto& values) {
    json out = json::array();
    for (const auto& [v, name] : values) out.push_back(std::string(name));
    return out;
  };
  EXPECT_EQ(spec["gang"]["properties"]["device"]["enum"], names(EnumNames<Device>::kValues));
  EXPECT_EQ(spec["model"]["properties"]["arch"]["enum"], names(EnumNames<Arch>::kValues));
  EXPECT_EQ(spec["model"]["properties"]["stem"]["enum"], names(EnumNames<Stem>::kValues));
  EXPECT_EQ(spec["model"]["properties"]["pooling"]["enum"], names(EnumNames<Pooling>::kValues));
  EXPECT_EQ(spec["data"]["properties"]["dataset"]["enum"], names(EnumNames<Dataset>::kValues));
  const json& training = spec["training"]["properties"];
  EXPECT_EQ(training["optimizer"]["properties"]["type"]["enum"], names(EnumNames<OptimizerKind>::kValues));
  EXPECT_EQ(training["lrSchedule"]["properties"]["type"]["enum"], names(EnumNames<LrScheduleKind>::kValues));
  EXPECT_EQ(training["precision"]["enum"], names(EnumNames<Precision>::kValues));
  const json& all_reduce = spec["allReduce"]["properties"];
  EXPECT_EQ(all_reduce["algorithm"]["enum"], names(EnumNames<AllReduceAlgorithm>::kValues));
  EXPECT_EQ(all_reduce["compression"]["enum"], names(EnumNames<Compression>::kValues));
  const json& run = spec["runPolicy"]["properties"];
  EXPECT_EQ(run["restartPolicy"]["enum"], names(EnumNames<RestartPolicy>::kValues));
  EXPECT_EQ(run["cleanPodPolicy"]["enum"], names(EnumNames<CleanPodPolicy>::kValues));
  EXPECT_EQ(run["topology"]["properties"]["placement"]["enum"], names(EnumNames<TopologyPlacement>::kValues));
  const json& status = openapi::crd_version_schema(c)["properties"]["status"]["properties"];
  EXPECT_EQ(status["phase"]["enum"], names(EnumNames<Phase>::kValues));
  EXPECT_EQ(status["conditions"]["items"]["properties"]["status"]["enum"], names(EnumNames<ConditionStatus>::kValues));
}

// What the C++ encoder writes (a full job with status) is accepted by the schema with nothing pruned.
TEST(CrdSchema, AcceptsEverythingTheEncoderWrites) {
  const json c = crd();
  const json& schema = openapi::crd_version_schema(c);
  for (const auto& path : testing::yaml_files(testing::source_dir() / "examples")) {
    const TrainingJob job = load_job_file(path.string());
    const json encoded = to_json(job);
    EXPECT_TRUE(openapi::validate_against_schema(schema, encoded).empty())
        << path << "\n"
        << join(openapi::validate_against_schema(schema, encoded));
    EXPECT_EQ(openapi::prune_unknown_fields(schema, encoded), encoded) << path;
  }
}

TEST(CrdAgreement, SchemaAndValidatorAgreeOnTheCorpus) {
  const json c = crd();
  const json& schema = openapi::crd_version_schema(c);
  const auto files = testing::corpus();
  ASSERT_GE(files.size(), 20u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.path.string());
    const json document = load_yaml(f.text, f.path.string());
    const std::vector<std::string> schema_errors = openapi::validate_against_schema(schema, document);
    const FieldErrors cxx_errors = check_decoded(decode_json(document));
    EXPECT_EQ(cxx_errors.empty(), f.valid);
    EXPECT_EQ(schema_errors.empty(), f.schema_accepts) << join(schema_errors);
    if (!f.schema_accepts) {
      // The schema names at least one of the fields the file is about.
      const bool named = std::any_of(f.expected_paths.begin(), f.expected_paths.end(), [&](const std::string& p) {
        return std::any_of(schema_errors.begin(), schema_errors.end(),
                           [&](const std::string& e) { return e.rfind(p + ":", 0) == 0; });
      });
      EXPECT_TRUE(named) << join(schema_errors);
    }
  }
}

TEST(Corpus, InvalidFilesReportTheirExpectedPaths) {
  for (const auto& f : testing::corpus()) {
    SCOPED_TRACE(f.path.string());
    const FieldErrors errors = check_file(f.path.string());
    if (f.valid) {
      EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].to_string());
      continue;
    }
    ASSERT_FALSE(f.expected.empty()) << "an invalid corpus file must state `# expect: PATH at LINE:COLUMN`";
    for (const auto& want : f.expected) {
      ASSERT_GT(want.line, 0) << want.path << ": a YAML corpus file must state where the error points";
      EXPECT_TRUE(std::any_of(
          errors.begin(), errors.end(),
          [&](const FieldError& e) { return e.path == want.path && e.line == want.line && e.column == want.column; }))
          << "no error at " << want.path << " pointing at " << want.line << ":" << want.column << "; got:\n"
          << [&] {
               std::string all;
               for (const auto& e : errors) all += e.to_string() + "\n";
               return all;
             }();
    }
  }
}

}  // namespace
}  // namespace torus::api

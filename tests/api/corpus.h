#pragma once
// Test helpers: the corpus of TrainingJob manifests (tests/corpus/{valid,invalid}/*.yaml) and the examples.
// An invalid file states what it expects in comment lines:
//   # expect: spec.training.batchSize at 10:26   an error `torus validate` must report (one line per error): its path
//                                                and where in the file it points (line:column)
//   # schema: accepts                            the CRD schema cannot express the rule (cross-field): it accepts it
#include <filesystem>
#include <string>
#include <vector>

namespace torus::api::testing {

struct ExpectedError {
  std::string path;
  int line = 0;  // 0: the file does not say
  int column = 0;
};

struct CorpusFile {
  std::filesystem::path path;
  std::string text;
  bool valid = false;                       // under valid/
  bool schema_accepts = false;              // valid, or marked `# schema: accepts`
  std::vector<std::string> expected_paths;  // from `# expect:` lines
  std::vector<ExpectedError> expected;      // the same, with their positions
};

std::filesystem::path source_dir();  // the repository root
std::string read_text(const std::filesystem::path& path);
std::vector<std::filesystem::path> yaml_files(const std::filesystem::path& dir);
std::vector<CorpusFile> corpus();

}  // namespace torus::api::testing

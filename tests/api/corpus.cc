#include "tests/api/corpus.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace torus::api::testing {

std::filesystem::path source_dir() { return TORUS_SOURCE_DIR; }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::filesystem::path> yaml_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// "spec.training.batchSize at 10:26" or "spec.training.batchSize".
ExpectedError parse_expected(const std::string& text) {
  static const std::regex kWithPosition(R"(^(\S+) at ([0-9]+):([0-9]+)$)");
  std::smatch m;
  if (!std::regex_match(text, m, kWithPosition)) return {text, 0, 0};
  return {m[1], std::stoi(m[2]), std::stoi(m[3])};
}

CorpusFile load(const std::filesystem::path& path, bool valid) {
  CorpusFile f{path, read_text(path), valid, valid, {}, {}};
  std::istringstream lines(f.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# expect: ", 0) == 0) {
      f.expected.push_back(parse_expected(line.substr(10)));
      f.expected_paths.push_back(f.expected.back().path);
    }
    if (line == "# schema: accepts") f.schema_accepts = true;
  }
  return f;
}

}  // namespace

std::vector<CorpusFile> corpus() {
  std::vector<CorpusFile> out;
  for (const auto& p : yaml_files(source_dir() / "tests/corpus/valid")) out.push_back(load(p, true));
  for (const auto& p : yaml_files(source_dir() / "tests/corpus/invalid")) out.push_back(load(p, false));
  return out;
}

}  // namespace torus::api::testing

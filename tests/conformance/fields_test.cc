// The conformance table (fields.h) against the CRD schema, read at test time: every leaf field of spec has exactly
// one row, every row is a schema field, and every row's test exists under tests/ and mentions its field.
#include "tests/conformance/fields.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/api/field_scope.h"

namespace torus::conformance {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = TORUS_SOURCE_DIR;

// Leaves of an OpenAPI v3 schema node: objects with properties recurse, lists of objects recurse as "[]", anything
// else (scalars, lists of scalars, opaque objects) is a leaf.
void leaves(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  const std::string type = node["type"] ? node["type"].as<std::string>() : "";
  if (type == "object" && node["properties"]) {
    for (const auto& p : node["properties"]) leaves(p.second, path + "." + p.first.as<std::string>(), out);
  } else if (type == "array" && node["items"] && node["items"]["properties"]) {
    leaves(node["items"], path + "[]", out);
  } else {
    out.insert(path);
  }
}

std::set<std::string> schema_fields() {
  const YAML::Node crd = YAML::LoadFile((kSource / "crds/trainingjobs.torus.dev.yaml").string());
  std::set<std::string> out;
  for (const auto& version : crd["spec"]["versions"])
    leaves(version["schema"]["openAPIV3Schema"]["properties"]["spec"], "spec", out);
  return out;
}

// "Suite.Name" -> the test's text: from its TEST line to the next test (or the file's end).
std::map<std::string, std::string> test_bodies() {
  static const std::regex kTest(R"(TEST(?:_F|_P)?\(\s*(\w+),\s*(\w+)\s*\))");
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "tests")) {
    if (entry.path().extension() != ".cc") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::vector<std::pair<std::string, size_t>> starts;
    for (std::sregex_iterator it(s.begin(), s.end(), kTest), end; it != end; ++it)
      starts.emplace_back((*it)[1].str() + "." + (*it)[2].str(), static_cast<size_t>(it->position()));
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t to = i + 1 < starts.size() ? starts[i + 1].second : s.size();
      out[starts[i].first] += s.substr(starts[i].second, to - starts[i].second);
    }
  }
  return out;
}

// "Suite.Name" of every TEST, TEST_F and TEST_P under tests/.
std::set<std::string> defined_tests() {
  std::set<std::string> out;
  for (const auto& [name, body] : test_bodies()) out.insert(name);
  return out;
}

std::string snake_case(std::string_view camel) {
  std::string out;
  for (char c : camel) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

// Whether `text` names the field whose path is `path`: its leaf as the job file writes it (camelCase) or as the C++
// structs do (snake_case), as a whole word; a one- or two-letter leaf (grid.x) only with its parent named too.
bool mentions(const std::string& text, std::string_view path) {
  std::string clean(path);
  for (size_t at; (at = clean.find("[]")) != std::string::npos;) clean.erase(at, 2);
  const size_t dot = clean.rfind('.');
  const std::string leaf = clean.substr(dot + 1);
  auto word = [&text](const std::string& w) { return std::regex_search(text, std::regex("\\b" + w + "\\b")); };
  const bool named = word(leaf) || word(snake_case(leaf)) || (leaf == "template" && word("pod_template"));
  if (leaf.size() > 2) return named;
  const std::string parent = clean.substr(0, dot).substr(clean.substr(0, dot).rfind('.') + 1);
  return named && (word(parent) || word(snake_case(parent)));
}

TEST(ConformanceTable, EverySchemaFieldHasARow) {
  const std::set<std::string> schema = schema_fields();
  ASSERT_GT(schema.size(), 50u) << "the CRD was not read";
  std::set<std::string> rows;
  for (const FieldRow& r : kFields) {
    EXPECT_TRUE(rows.insert(std::string(r.path)).second) << r.path << ": two rows";
  }
  for (const std::string& f : schema) {
    EXPECT_TRUE(rows.count(f)) << f << ": a schema field without a row in tests/conformance/fields.h (which "
                               << "launcher applies it, and which test shows its effect?)";
  }
  for (const std::string& r : rows) EXPECT_TRUE(schema.count(r)) << r << ": a row for no schema field";
}

TEST(ConformanceTable, EveryRowNamesATestThatExists) {
  const std::set<std::string> tests = defined_tests();
  for (const FieldRow& r : kFields) {
    EXPECT_TRUE(tests.count(std::string(r.test))) << r.path << ": names " << r.test << ", which no file under tests/ "
                                                  << "defines";
  }
}

// A test shows a field's effect only if it sets or reads that field: a row naming a test that never mentions it is a
// claim nobody checked.
TEST(ConformanceTable, EveryRowsTestMentionsItsField) {
  const std::map<std::string, std::string> bodies = test_bodies();
  for (const FieldRow& r : kFields) {
    const auto body = bodies.find(std::string(r.test));
    if (body == bodies.end()) continue;  // EveryRowNamesATestThatExists says so
    EXPECT_TRUE(mentions(body->second, r.path)) << r.path << ": " << r.test << " never mentions the field";
  }
}

TEST(ConformanceTable, MentionsIsAWholeWordInEitherSpelling) {
  EXPECT_TRUE(mentions("gang: {threadsPerProcess: 1}", "spec.gang.threadsPerProcess"));
  EXPECT_TRUE(mentions("spec.gang.threads_per_process = 3;", "spec.gang.threadsPerProcess"));
  EXPECT_FALSE(mentions("threadsPerProcessX", "spec.gang.threadsPerProcess"));
  EXPECT_TRUE(mentions("grid: {x: 2, y: 2}", "spec.allReduce.grid.x"));
  EXPECT_FALSE(mentions("int x = 2;", "spec.allReduce.grid.x"));
  EXPECT_TRUE(mentions("phases: [{fromEpoch: 0}]", "spec.training.phases[].fromEpoch"));
}

TEST(ConformanceTable, TheDocsSayWhereEveryFieldActs) {
  std::ifstream in(kSource / "docs/trainingjob.md");
  std::stringstream text;
  text << in.rdbuf();
  for (const FieldRow& r : kFields) {
    // The docs write the path below spec (list elements as [], as here).
    const std::string path(r.path.substr(std::string_view("spec.").size()));
    EXPECT_NE(text.str().find("| `" + path + "` |"), std::string::npos)
        << r.path << ": no row in docs/trainingjob.md's \"Where each field acts\" table";
  }
}

// `torus run` names the operator-only fields a job sets from api::kOperatorOnlyFields (common/api/field_scope.h);
// this table says which fields only the operator applies. They must agree (managedBy aside: torus run reads it to
// refuse a job another controller runs), or torus run would stay silent about a field it ignores.
TEST(ConformanceTable, TorusRunsListOfFieldsItDoesNotApplyIsTheTablesOperatorOnlyRows) {
  std::set<std::string> table, api;
  for (const FieldRow& row : kFields)
    if (row.launchers == Launchers::kOperator && row.path != "spec.runPolicy.managedBy") table.emplace(row.path);
  for (std::string_view path : torus::api::kOperatorOnlyFields) api.emplace(path);
  EXPECT_EQ(api, table);
}

// The lines rank 0 logs about its own settings, its effective configuration (worker/app/worker_main.cc's
// log_effective_configuration: describe(RunOptions), the engine, worker/train/trainer_describe.cc, the gradient
// reducer's plan), as patterns of how a test would look for them.
const std::array<std::regex, 14> kSettingsLogLines = {
    std::regex("^world: "),        std::regex("^engine: "),
    std::regex("^model: "),        std::regex("^data: "),
    std::regex("^optimizer: "),    std::regex("^learning rate through"),
    std::regex("^phase [0-9]+: "), std::regex("^precision: "),
    std::regex("^seed: [0-9]"),    std::regex("^checkpoints: "),
    std::regex("^buckets [0-9]"),  std::regex("^collective timeout [0-9]"),
    std::regex("^torus grid "),    std::regex("^gradient all-reduce: "),
};

// Rows whose test reads rank 0's log of the setting, each with why (issue 40.2). Any other row whose test reads that
// log fails the table test, and so does a row here whose test no longer reads it.
const std::map<std::string_view, std::string_view> kReadsRankZerosLog = {
    // Shown by the log alone: no effect of theirs is read yet.
    {"spec.gang.threadsPerProcess", "only: the engine's thread count changes no result, and no test counts threads"},
    {"spec.data.loaderThreads", "only: the loader's thread count changes no result, and no test counts threads"},
    {"spec.training.rectangularValidation", "only: square images (synthetic, the test's folder) evaluate alike"},
    {"spec.allReduce.grid.x", "only: a grid changes no result, and no figure of a run is per grid dimension"},
    {"spec.allReduce.grid.y", "only: a grid changes no result, and no figure of a run is per grid dimension"},
    // Shown by an effect, the log read beside it.
    {"spec.training.precision", "beside the effect: each rank's exported torus_worker_run_info{activations}"},
};

// Whether `body` looks for a line of rank 0's settings log: a string literal that starts like one.
bool reads_the_settings_log(const std::string& body) {
  static const std::regex kLiteral(R"re("((?:[^"\\]|\\.)*)")re");
  for (std::sregex_iterator it(body.begin(), body.end(), kLiteral), end; it != end; ++it) {
    const std::string literal = (*it)[1];
    for (const std::regex& line : kSettingsLogLines)
      if (std::regex_search(literal, line)) return true;
  }
  return false;
}

// A field is shown by its effect seen from outside (the parameters or files a run leaves, its metrics, status or exit
// code), not by rank 0 repeating the configuration it was given: a row's test through the real binaries does not
// read that log, but for the rows listed above.
TEST(ConformanceTable, NoRowIsShownByRankZerosLogOfItsSettings) {
  const std::map<std::string, std::string> bodies = test_bodies();
  for (const FieldRow& r : kFields) {
    const auto body = bodies.find(std::string(r.test));
    if (r.evidence != Evidence::kBinaries || body == bodies.end()) continue;
    const bool reads_log = reads_the_settings_log(body->second);
    if (kReadsRankZerosLog.count(r.path)) {
      EXPECT_TRUE(reads_log) << r.path << ": " << r.test << " no longer reads rank 0's log: take the row off "
                             << "kReadsRankZerosLog";
    } else {
      EXPECT_FALSE(reads_log) << r.path << ": " << r.test << " reads rank 0's log of its settings; show the field "
                              << "by its effect (parameters, checkpoint files, metrics, status, exit code)";
    }
  }
}

TEST(ConformanceTable, ReadingTheSettingsLogIsALiteralThatStartsLikeOneOfItsLines) {
  EXPECT_TRUE(reads_the_settings_log(R"(EXPECT_TRUE(has(out, "optimizer: sgd, momentum 0.8"));)"));
  EXPECT_TRUE(reads_the_settings_log(R"(has(out, std::string("torus grid ") + grid))"));
  EXPECT_FALSE(reads_the_settings_log(R"(run(job, {"spec.training.optimizer={type: sgd}"}))"));
  EXPECT_FALSE(reads_the_settings_log(R"(out.field("phase"); "  model: {arch: resnet9}")"));
  EXPECT_FALSE(reads_the_settings_log(R"(<< "phase " << phase("golf"))"));
  EXPECT_TRUE(reads_the_settings_log(R"(has(out, "phase 1: epochs [1, 2), per-rank batch 4, image 12"))"));
}

}  // namespace
}  // namespace torus::conformance

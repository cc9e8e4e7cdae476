// The conformance table (fields.h) against the CRD schema, read at test time: every leaf field of spec has exactly
// one row, every row is a schema field, and every row's test exists under tests/.
#include "tests/conformance/fields.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

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

// "Suite.Name" of every TEST, TEST_F and TEST_P under tests/.
std::set<std::string> defined_tests() {
  static const std::regex kTest(R"(TEST(?:_F|_P)?\(\s*(\w+),\s*(\w+)\s*\))");
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "tests")) {
    if (entry.path().extension() != ".cc") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), kTest), end; it != end; ++it)
      out.insert((*it)[1].str() + "." + (*it)[2].str());
  }
  return out;
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

}  // namespace
}  // namespace torus::conformance

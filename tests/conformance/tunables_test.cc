// The one table of developer overrides (common/util/tunables.h): read with their types, refused when undeclared or
// malformed, and listed in docs/tunables.md exactly as declared.
#include "common/util/tunables.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/util/error.h"

namespace torus::tunables {
namespace {

TEST(Tunables, SnapshotReadsDeclaredValuesWithTheirTypes) {
  const Snapshot s = Snapshot::of({{"TORUS_COMM_TIMEOUT_MS", "2500"}, {"TORUS_COST_NET_GBPS", "1.5"}});
  EXPECT_EQ(s.integer("TORUS_COMM_TIMEOUT_MS"), 2500);
  EXPECT_DOUBLE_EQ(s.number("TORUS_COST_NET_GBPS").value(), 1.5);
  EXPECT_FALSE(s.text("TORUS_ALLREDUCE_ALGO").has_value());
  EXPECT_EQ(s.describe(), (std::vector<std::string>{"TORUS_COMM_TIMEOUT_MS=2500", "TORUS_COST_NET_GBPS=1.5"}));
  EXPECT_THROW(s.text("TORUS_NEVER_DECLARED"), InvalidArgument) << "reading an undeclared name is a bug";
  try {
    Snapshot::of({{"TORUS_SHM_SLOT_BYTES", "64k"}});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "environment variable TORUS_SHM_SLOT_BYTES: expected an integer, got '64k'");
  }
}

TEST(Tunables, DocsListEveryTunableAsDeclared) {
  std::ifstream in(std::string(TORUS_SOURCE_DIR) + "/docs/tunables.md");
  std::stringstream text;
  text << in.rdbuf();
  for (const Tunable& t : table()) {
    const std::string row = "| `" + std::string(t.name) + "` | " + std::string(to_string(t.type)) + " | ";
    EXPECT_NE(text.str().find(row), std::string::npos) << t.name << ": docs/tunables.md lacks the row " << row;
    if (!t.overrides.empty()) {
      EXPECT_NE(text.str().find("`" + std::string(t.overrides) + "`"), std::string::npos) << t.name;
    }
  }
}

// A TORUS_ variable the code reads straight from the environment is a tunable like the others: declared in the table
// (and so in the docs). The launch contract's variables (common/launch/, one reader) are not tunables.
TEST(Tunables, EveryVariableTheCodeReadsIsDeclared) {
  const std::regex read(R"re((?:env::get(?:_or)?|getenv)\(\s*"(TORUS_[A-Z0-9_]+)")re");
  std::set<std::string> declared_names;
  for (const Tunable& t : table()) declared_names.insert(std::string(t.name));
  int files = 0;
  for (const char* dir : {"common", "operator", "worker"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(TORUS_SOURCE_DIR) + "/" + dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".cc" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      if (entry.path().parent_path().filename() == "launch") continue;
      ++files;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (std::sregex_iterator m(text.begin(), text.end(), read), end; m != end; ++m)
        EXPECT_TRUE(declared_names.contains((*m)[1].str()))
            << entry.path() << " reads " << (*m)[1] << ", which common/util/tunables.cc does not declare";
    }
  }
  EXPECT_GT(files, 100) << "the scan found the sources";
}

}  // namespace
}  // namespace torus::tunables

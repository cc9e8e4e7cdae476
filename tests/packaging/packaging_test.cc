// Drives the packaging checks written in Python (they need the Helm library, which only has Python bindings):
// chart_test.py renders charts/torus-operator with the official Helm library.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/shell.h"

namespace {

::torus::test::ShellResult run_python(const std::string& script) {
  return ::torus::test::run_shell("/usr/bin/python3 " + std::string(TORUS_SOURCE_DIR) + "/tests/packaging/" + script);
}

TEST(HelmChart, RendersWithTheOfficialHelmLibraryAndPassesItsChecks) {
  const ::torus::test::ShellResult outcome = run_python("chart_test.py");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("\nOK"), std::string::npos) << outcome.output;
}

}  // namespace

// Drives the packaging checks written in Python (they need the Helm library, which only has Python bindings):
// chart_test.py renders charts/torus-operator with the official Helm library; dockerfile_test.py checks docker/.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <string>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;
};

Outcome run_python(const std::string& script) {
  const std::string command =
      "/usr/bin/python3 " + std::string(TORUS_SOURCE_DIR) + "/tests/packaging/" + script + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  Outcome outcome;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) outcome.output.append(chunk, n);
  const int status = ::pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

TEST(HelmChart, RendersWithTheOfficialHelmLibraryAndPassesItsChecks) {
  const Outcome outcome = run_python("chart_test.py");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("\nOK"), std::string::npos) << outcome.output;
}

TEST(Dockerfiles, CopySourcesExistBinariesAreBuiltImagesPinnedUserNonRoot) {
  const Outcome outcome = run_python("dockerfile_test.py");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("\nOK"), std::string::npos) << outcome.output;
}

}  // namespace

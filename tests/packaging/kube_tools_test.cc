// The kubectl and helm the tests drive the stand-in with are the project's pinned clients (scripts/lib.sh,
// torus_install_kube_tools) or newer: a machine's older kubectl (Debian's is v1.20, this image's v1.32) would test
// the operator against a client users no longer run.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "tests/support/shell.h"

namespace {

using Version = std::array<int, 3>;

// "v1.35.2" or "v4.1.4+g05fa379" -> {1, 35, 2}; throws on anything else, so an unreadable answer fails the test.
Version parse_version(const std::string& text) {
  std::smatch m;
  static const std::regex pattern(R"(^v(\d+)\.(\d+)\.(\d+))");
  if (!std::regex_search(text, m, pattern)) throw std::runtime_error("not a version: '" + text + "'");
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

// The value of `NAME="..."` in scripts/lib.sh: the pins are declared there once.
std::string pin(const std::string& name) {
  std::ifstream in(std::string(TORUS_SOURCE_DIR) + "/scripts/lib.sh");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  if (!std::regex_search(s, m, std::regex(name + "=\"([^\"]+)\""))) throw std::runtime_error("no " + name);
  return m[1];
}

std::string kubectl_version(const std::string& binary) {
  const auto r = ::torus::test::run_shell(binary + " version --client -o json 2>/dev/null");
  if (r.exit_code != 0) throw std::runtime_error(binary + " version: exit " + std::to_string(r.exit_code));
  return nlohmann::json::parse(r.output).at("clientVersion").at("gitVersion").get<std::string>();
}

std::string helm_version(const std::string& binary) {
  const auto r = ::torus::test::run_shell(binary + " version --template '{{.Version}}'");
  if (r.exit_code != 0) throw std::runtime_error(binary + " version: exit " + std::to_string(r.exit_code));
  return r.output;
}

TEST(KubeTools, VersionsParseAndCompareByNumberNotText) {
  EXPECT_EQ(parse_version("v1.35.2"), (Version{1, 35, 2}));
  EXPECT_EQ(parse_version("v4.1.4+g05fa379"), (Version{4, 1, 4}));
  EXPECT_LT(parse_version("v1.9.0"), parse_version("v1.35.2"));  // "v1.9" > "v1.35" as text
  EXPECT_LT(parse_version("v1.32.3"), parse_version("v1.35.2"));
  EXPECT_THROW(parse_version("1.35"), std::runtime_error);
}

TEST(KubeTools, KubectlTheTestsRunIsAtLeastThePinnedVersion) {
  const std::string found = kubectl_version(TORUS_KUBECTL);
  EXPECT_GE(parse_version(found), parse_version(pin("TORUS_KUBECTL_VERSION")))
      << TORUS_KUBECTL << " is " << found << "; scripts/lib.sh pins " << pin("TORUS_KUBECTL_VERSION");
}

TEST(KubeTools, HelmTheTestsRunIsAtLeastThePinnedVersion) {
  const std::string found = helm_version(TORUS_HELM);
  EXPECT_GE(parse_version(found), parse_version(pin("TORUS_HELM_VERSION")))
      << TORUS_HELM << " is " << found << "; scripts/lib.sh pins " << pin("TORUS_HELM_VERSION");
}

}  // namespace

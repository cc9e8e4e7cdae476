// The real CRD through the real kubectl (the pinned v1.35, TORUS_KUBECTL) against the API stand-in (tests/apiserver):
// the CRD is accepted as a structural schema and established, every example is admitted, files the schema rejects are
// refused with their field path, and `kubectl get tj` shows the printer columns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/api/corpus.h"
#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using ::testing::HasSubstr;

class CrdKubectlTest : public StandinTest {
 protected:
  void install_crd() const {
    const auto crd = api::testing::source_dir() / "crds/trainingjobs.torus.dev.yaml";
    EXPECT_THAT(ok({"apply", "-f", crd.string()}), HasSubstr("trainingjobs.torus.dev"));
  }
  // Through `apply -f` (JSON); `kubectl create namespace` sends protobuf, which the stand-in does not speak.
  void create_namespace(const std::string& name) const {
    ok({"apply", "-f",
        write_file("ns-" + name + ".yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n")});
  }
};

TEST_F(CrdKubectlTest, CrdIsEstablishedAndExamplesAreAdmitted) {
  install_crd();
  EXPECT_THAT(ok({"get", "crd", "trainingjobs.torus.dev", "-o",
                  "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"}),
              HasSubstr("True"));
  create_namespace("research");
  for (const auto& path : api::testing::yaml_files(api::testing::source_dir() / "examples")) {
    EXPECT_THAT(ok({"apply", "-f", path.string()}), HasSubstr("created")) << path;
  }
  const std::string table = ok({"get", "tj"});
  for (const char* column : {"NAME", "PHASE", "READY", "RESTARTS", "EPOCH", "ACCURACY", "IMAGES/S", "AGE"}) {
    EXPECT_THAT(table, HasSubstr(column));
  }
  EXPECT_THAT(table, HasSubstr("fashion-mnist"));
  // Stored as written: no field was pruned from what the C++ codec reads.
  const json stored = get_json({"get", "tj", "fashion-mnist", "-o", "json"});
  EXPECT_EQ(stored["spec"]["training"]["lrSchedule"]["peak"], 0.2);
  EXPECT_EQ(stored["spec"]["model"]["widths"], json::array({8, 16, 32, 64}));
}

TEST_F(CrdKubectlTest, CorpusVerdictsMatchTheApiserver) {
  install_crd();
  create_namespace("ml");
  for (const auto& f : api::testing::corpus()) {
    SCOPED_TRACE(f.path.string());
    const CommandResult r = kubectl({"apply", "-f", f.path.string()});
    // Two differences from the schema check, both as a real apiserver behaves: with the status subresource, a
    // create ignores `status` (so a bad status is dropped, not refused), and kubectl itself refuses an apiVersion
    // the apiserver does not serve.
    const bool only_status =
        !f.expected_paths.empty() && std::all_of(f.expected_paths.begin(), f.expected_paths.end(),
                                                 [](const std::string& p) { return p.rfind("status.", 0) == 0; });
    const bool unserved_version = f.text.find("apiVersion: torus.dev/v1alpha1") == std::string::npos;
    const bool admitted = (f.schema_accepts || only_status) && !unserved_version;
    EXPECT_EQ(r.exit_code == 0, admitted) << r.out << r.err;
    if (unserved_version) {
      EXPECT_THAT(r.err, HasSubstr("no matches for kind \"TrainingJob\""));
    } else if (r.exit_code != 0) {
      bool named = false;
      for (const auto& p : f.expected_paths) named = named || r.err.find(p) != std::string::npos;
      EXPECT_TRUE(named) << r.err;
    } else {
      kubectl({"delete", "--wait=false", "-f", f.path.string()});  // several corpus files share a name
    }
  }
}

}  // namespace
}  // namespace torus::standin::testing

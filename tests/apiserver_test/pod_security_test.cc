// The PodSecurity admission plugin (pod_security.h): a namespace's labels read as api/helpers_test.go reads them,
// namespace label changes judged as admission/admission_test.go judges them, and the stand-in refusing and warning
// through the real kubectl and plain HTTP with kube-apiserver's words.
#include "tests/apiserver/pod_security.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

json labels_of(std::initializer_list<std::pair<const char*, const char*>> modes) {
  json labels = json::object();
  for (const auto& [mode, value] : modes) labels[std::string("pod-security.kubernetes.io/") + mode] = value;
  return labels;
}

std::string policy_text(const PodSecurityPolicy& p) {
  return "enforce=" + p.enforce.text() + " warn=" + p.warn.text() + " audit=" + p.audit.text();
}

// api/helpers_test.go TestPolicyToEvaluate.
TEST(PodSecurityPolicy, NamespaceLabelsReadAsUpstreamReadsThem) {
  struct Case {
    json labels;
    const char* expect;
    size_t errors;
  };
  const Case cases[] = {
      {json::object(), "enforce=privileged:latest warn=privileged:latest audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"}}), "enforce=baseline:latest warn=baseline:latest audit=privileged:latest", 0},
      {labels_of({{"warn", "restricted"}}), "enforce=privileged:latest warn=restricted:latest audit=privileged:latest",
       0},
      {labels_of({{"audit", "baseline"}}), "enforce=privileged:latest warn=privileged:latest audit=baseline:latest", 0},
      {labels_of({{"enforce", "baseline"}, {"warn", "restricted"}}),
       "enforce=baseline:latest warn=restricted:latest audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"}, {"enforce-version", "v1.22"}}),
       "enforce=baseline:v1.22 warn=baseline:v1.22 audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"}, {"enforce-version", "v1.22"}, {"warn-version", "latest"}}),
       "enforce=baseline:v1.22 warn=baseline:latest audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"}, {"warn-version", "v1.23"}}),
       "enforce=baseline:latest warn=baseline:v1.23 audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"},
                  {"enforce-version", "v1.20"},
                  {"warn", "restricted"},
                  {"warn-version", "v1.21"},
                  {"audit", "restricted"},
                  {"audit-version", "v1.22"}}),
       "enforce=baseline:v1.20 warn=restricted:v1.21 audit=restricted:v1.22", 0},
      {labels_of({{"enforce", "baseline"}, {"warn", "privileged"}}),
       "enforce=baseline:latest warn=privileged:latest audit=privileged:latest", 0},
      {labels_of({{"enforce", "baseline"}, {"warn", "foo"}}),
       "enforce=baseline:latest warn=privileged:latest audit=privileged:latest", 1},
      {labels_of({{"enforce", "foo"}}), "enforce=restricted:latest warn=privileged:latest audit=privileged:latest", 1},
      {labels_of({{"enforce", "baseline"}, {"enforce-version", "v1.022"}}),
       "enforce=baseline:latest warn=baseline:latest audit=privileged:latest", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.labels.dump());
    const NamespacePolicy read = namespace_policy(c.labels);
    EXPECT_EQ(policy_text(read.policy), c.expect);
    EXPECT_EQ(read.errors.size(), c.errors);
  }
  const NamespacePolicy bad = namespace_policy(labels_of({{"enforce", "strict"}, {"warn-version", "1.30"}}));
  ASSERT_EQ(bad.errors.size(), 2u);
  EXPECT_EQ(bad.errors[0].field, "metadata.labels[pod-security.kubernetes.io/enforce]");
  EXPECT_EQ(bad.errors[0].message, "Invalid value: \"strict\": must be one of privileged, baseline, restricted");
  EXPECT_EQ(bad.errors[1].message, "Invalid value: \"1.30\": must be \"latest\" or \"v1.x\"");
}

// admission_test.go TestValidateNamespace: its fake evaluator refuses a pod with the reason in its "error"
// annotation; here one restricted check does the same.
PodSecurityEvaluator annotation_evaluator() {
  PodSecurityCheck check{"fake", PodSecurityLevel::kRestricted, {}, ""};
  check.versions.push_back({0,
                            [](const json& metadata, const json&) {
                              const std::string reason =
                                  metadata.value("annotations", json::object()).value("error", "");
                              return CheckResult{reason.empty(), reason, ""};
                            },
                            {}});
  return PodSecurityEvaluator({check});
}

json namespace_with(json labels) { return {{"metadata", {{"name", "test"}, {"labels", std::move(labels)}}}}; }

json pod_named(const std::string& name, const std::string& error, const std::string& controller = "") {
  json pod = {{"metadata", {{"name", name}, {"annotations", {{"error", error}}}}}, {"spec", json::object()}};
  if (!controller.empty()) pod["metadata"]["ownerReferences"] = {{{"uid", controller}, {"controller", true}}};
  return pod;
}

TEST(PodSecurityNamespaces, LabelChangesAreValidatedAndAStricterLevelNamesTheViolatingPods) {
  const PodSecurityEvaluator evaluator = annotation_evaluator();
  const std::vector<json> pods = {pod_named("replicaset1pod2", "replicaset1error", "1"),
                                  pod_named("replicaset1pod1", "replicaset1error", "1"),
                                  pod_named("uniquepod2", "uniquemessage"),
                                  pod_named("uniquepod1", "uniquemessage"),
                                  pod_named("fine", ""),
                                  pod_named("other", "message, message2")};
  std::vector<const json*> stored;
  for (const json& pod : pods) stored.push_back(&pod);
  std::vector<std::string> warnings;
  const json restricted = namespace_with(labels_of({{"enforce", "restricted"}}));
  const json baseline = namespace_with(labels_of({{"enforce", "baseline"}}));

  admit_namespace_pod_security(evaluator, restricted, nullptr, stored, warnings);
  EXPECT_TRUE(warnings.empty()) << "a create only validates the labels";
  admit_namespace_pod_security(evaluator, baseline, &restricted, stored, warnings);
  EXPECT_TRUE(warnings.empty()) << "relaxed at the same version";

  admit_namespace_pod_security(evaluator, restricted, &baseline, stored, warnings);
  EXPECT_EQ(warnings,
            (std::vector<std::string>{R"(existing pods in namespace "test" violate the new PodSecurity enforce level )"
                                      R"("restricted:latest")",
                                      "other: message, message2", "replicaset1pod1 (and 1 other pod): replicaset1error",
                                      "uniquepod1 (and 1 other pod): uniquemessage"}));

  const json malformed = namespace_with(labels_of({{"enforce", "unknown"}}));
  try {
    admit_namespace_pod_security(evaluator, malformed, &restricted, stored, warnings);
    ADD_FAILURE() << "a malformed level was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 422);
    EXPECT_STREQ(e.what(),
                 "Namespace \"test\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "
                 "\"unknown\": must be one of privileged, baseline, restricted");
  }
  warnings.clear();
  EXPECT_NO_THROW(admit_namespace_pod_security(evaluator, malformed, &malformed, stored, warnings))
      << "an update that keeps the same malformed labels";
}

// The stand-in itself, driven by the real kubectl.
class PodSecurityTest : public testing::StandinTest {
 protected:
  void SetUp() override {
    StandinTest::SetUp();
    ok({"create", "namespace", "psa"});
  }
  testing::CommandResult run_pod(const std::string& name) {
    return kubectl({"run", name, "-n", "psa", "--image=registry.example/torus-worker:1", "--restart=Never"});
  }
};

const char* kRootPodRefusal =
    R"(pods "root" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false )"
    R"((container "root" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities )"
    R"((container "root" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or )"
    R"(container "root" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "root" must )"
    R"(set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"))";

const char* kRestrictedPod = R"(apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: psa}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: w
    image: registry.example/torus-worker:1
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [DROP]}}
)";

std::string restricted_pod(const std::string& name, const std::string& drop = "ALL") {
  std::string text = kRestrictedPod;
  text.replace(text.find("NAME"), 4, name);
  text.replace(text.find("DROP"), 4, drop);
  return text;
}

TEST_F(PodSecurityTest, AnEnforcedLevelRefusesARootPodWithKubeApiserversMessage) {
  ASSERT_EQ(run_pod("before").exit_code, 0) << "no label: privileged";
  ok({"label", "ns", "psa", "pod-security.kubernetes.io/enforce=restricted"});
  testing::CommandResult refused = run_pod("root");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr(std::string("Error from server (Forbidden): ") + kRootPodRefusal));
  testing::CommandResult admitted = kubectl({"apply", "-f", write_file("ok.yaml", restricted_pod("worker"))});
  EXPECT_EQ(admitted.exit_code, 0) << admitted.err;
  EXPECT_THAT(admitted.err, Not(HasSubstr("Warning")));

  // Plain HTTP: the Status as kube-apiserver sends it.
  const testing::HttpReply reply = testing::http_request(
      server_->port(), boost::beast::http::verb::post, "/api/v1/namespaces/psa/pods",
      R"({"metadata":{"name":"root"},"spec":{"containers":[{"name":"root","image":"busybox"}]}})");
  EXPECT_EQ(reply.status, 403);
  const json status = reply.body_json();
  EXPECT_EQ(status["reason"], "Forbidden");
  EXPECT_EQ(status["message"], kRootPodRefusal);
  EXPECT_EQ(status["details"], (json{{"name", "root"}, {"kind", "pods"}}));
}

TEST_F(PodSecurityTest, TheWarnLevelAdmitsWithAWarningAndWorkloadsAreOnlyWarned) {
  ok({"label", "ns", "psa", "pod-security.kubernetes.io/enforce=baseline",
      "pod-security.kubernetes.io/warn=restricted"});
  testing::CommandResult warned = run_pod("root");
  EXPECT_EQ(warned.exit_code, 0) << warned.err;
  EXPECT_THAT(warned.err,
              HasSubstr(R"(Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation)"));
  EXPECT_THAT(ok({"get", "pods", "-n", "psa", "-o", "name"}), HasSubstr("pod/root"));

  ok({"label", "ns", "psa", "--overwrite", "pod-security.kubernetes.io/enforce=restricted"});
  // (`kubectl create deployment` sends protobuf, which the stand-in reads for a few kinds only: a manifest.)
  testing::CommandResult deployment =
      kubectl({"create", "-f",
               write_file("web.yaml",
                          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: psa}\nspec:\n"
                          "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
                          "    spec: {containers: [{name: web, image: registry.example/web:1}]}\n")});
  EXPECT_EQ(deployment.exit_code, 0) << "a Deployment is never refused: " << deployment.err;
  EXPECT_THAT(deployment.err, HasSubstr(R"(Warning: would violate PodSecurity "restricted:latest": )"
                                        R"(allowPrivilegeEscalation != false (container "web" must set)"));
}

TEST_F(PodSecurityTest, TheVersionLabelAppliesTheRulesOfThatVersion) {
  // Before v1.22 restricted did not require dropping every capability.
  ok({"label", "ns", "psa", "pod-security.kubernetes.io/enforce=restricted",
      "pod-security.kubernetes.io/enforce-version=v1.21"});
  testing::CommandResult old_rules = kubectl({"apply", "-f", write_file("p.yaml", restricted_pod("keeps", "NET_RAW"))});
  EXPECT_EQ(old_rules.exit_code, 0) << old_rules.err;

  testing::CommandResult tightened =
      kubectl({"label", "ns", "psa", "--overwrite", "pod-security.kubernetes.io/enforce-version=latest"});
  EXPECT_EQ(tightened.exit_code, 0) << tightened.err;
  EXPECT_THAT(tightened.err, HasSubstr(R"(Warning: existing pods in namespace "psa" violate the new PodSecurity )"
                                       R"(enforce level "restricted:latest")"));
  EXPECT_THAT(tightened.err, HasSubstr("Warning: keeps: unrestricted capabilities"));
  testing::CommandResult refused = kubectl({"apply", "-f", write_file("q.yaml", restricted_pod("new", "NET_RAW"))});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err,
              HasSubstr(R"(pods "new" is forbidden: violates PodSecurity "restricted:latest": unrestricted )"
                        R"(capabilities (container "w" must set securityContext.capabilities.drop=["ALL"]))"));
}

TEST_F(PodSecurityTest, OnlyUpdatesThatChangeAnImageAreCheckedAgain) {
  ASSERT_EQ(run_pod("root").exit_code, 0);
  ok({"label", "ns", "psa", "pod-security.kubernetes.io/enforce=restricted"});
  ok({"label", "pod", "root", "-n", "psa", "tier=old"});  // metadata only
  testing::CommandResult image = kubectl({"set", "image", "pod/root", "-n", "psa", "root=registry.example/x:2"});
  EXPECT_NE(image.exit_code, 0);
  EXPECT_THAT(image.err, HasSubstr(R"(pods "root" is forbidden: violates PodSecurity "restricted:latest")"));
}

TEST_F(PodSecurityTest, InvalidLabelsAreRefusedAsTheAdmissionPluginRefusesThem) {
  testing::CommandResult bad = kubectl({"label", "ns", "psa", "pod-security.kubernetes.io/enforce=strict"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr(R"(Namespace "psa" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: )"
                                 R"(Invalid value: "strict": must be one of privileged, baseline, restricted)"));
}

}  // namespace
}  // namespace torus::standin

// The Pod Security Standards checks (pod_security_checks.h), against the cases of k8s.io/pod-security-admission's own
// tests: policy/check_*_test.go (each versioned check function on a pod, with the exact reason and detail),
// policy/registry_test.go (which checks run at a level and version) and test/fixtures.go (the minimal pod each level
// and version admits).
#include "tests/apiserver/pod_security_checks.h"

#include <gtest/gtest.h>

#include "tests/apiserver/pod_security.h"

namespace torus::standin {
namespace {

struct CheckCase {
  const char* check;   // the table row's id
  int minor;           // which of its versions: the one starting at v1.<minor>
  const char* pod;     // {"metadata": ..., "spec": ...}
  const char* reason;  // "" when the pod is allowed
  const char* detail;
};

const VersionedCheck& versioned(const std::string& id, int minor) {
  for (const PodSecurityCheck& check : pod_security_checks()) {
    if (check.id != id) continue;
    for (const VersionedCheck& version : check.versions) {
      if (version.minimum_minor == minor) return version;
    }
  }
  throw std::out_of_range("no check " + id + " at v1." + std::to_string(minor));
}

// Upstream's cases, one per test case of policy/check_<id>_test.go (the Go pointers written as JSON fields).
const CheckCase kCases[] = {
    {"allowPrivilegeEscalation", 8,
     R"({"spec":{"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"c","securityContext":{"allowPrivilegeEscalation":true}},
        {"name":"d","securityContext":{"allowPrivilegeEscalation":false}}]}})",
     "allowPrivilegeEscalation != false",
     R"(containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false)"},
    {"allowPrivilegeEscalation", 25, R"({"spec":{"os":{"name":"windows"},"containers":[{"name":"a"}]}})", "", ""},
    {"allowPrivilegeEscalation", 25, R"({"spec":{"os":{"name":"linux"},"containers":[{"name":"a"}]}})",
     "allowPrivilegeEscalation != false", R"(container "a" must set securityContext.allowPrivilegeEscalation=false)"},
    {"appArmorProfile", 0,
     R"({"metadata":{"annotations":{"container.apparmor.security.beta.kubernetes.io/test":"localhost/sec-profile01",
        "env":"dev"}},"spec":{"securityContext":{"appArmorProfile":{"type":"RuntimeDefault"}}}})",
     "", ""},
    {"appArmorProfile", 0, R"({"spec":{"securityContext":{"appArmorProfile":{"type":"Unconfined"}}}})",
     "forbidden AppArmor profile", R"(pod must not set AppArmor profile type to "Unconfined")"},
    {"appArmorProfile", 0,
     R"({"spec":{"securityContext":{"appArmorProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"foo"}],
        "initContainers":[{"name":"bar","securityContext":{"appArmorProfile":{"type":"Unconfined"}}}]}})",
     "forbidden AppArmor profile", R"(container "bar" must not set AppArmor profile type to "Unconfined")"},
    {"appArmorProfile", 0,
     R"({"metadata":{"annotations":{"container.apparmor.security.beta.kubernetes.io/":"bogus",
        "container.apparmor.security.beta.kubernetes.io/a":"",
        "container.apparmor.security.beta.kubernetes.io/b":"runtime/default",
        "container.apparmor.security.beta.kubernetes.io/c":"localhost/",
        "container.apparmor.security.beta.kubernetes.io/d":"localhost/foo",
        "container.apparmor.security.beta.kubernetes.io/e":"unconfined",
        "container.apparmor.security.beta.kubernetes.io/f":"unknown"}}})",
     "forbidden AppArmor profiles",
     R"(annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/="bogus"", )"
     R"("container.apparmor.security.beta.kubernetes.io/e="unconfined"", )"
     R"("container.apparmor.security.beta.kubernetes.io/f="unknown"")"},
    {"capabilities_baseline", 0,
     R"({"spec":{"containers":[{"name":"a","securityContext":{"capabilities":{"add":["FOO","BAR"]}}},
        {"name":"b","securityContext":{"capabilities":{"add":["BAR","BAZ"]}}}]}})",
     "non-default capabilities",
     R"(containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add)"},
    {"capabilities_restricted", 22,
     R"({"spec":{"containers":[{"name":"a","securityContext":{"capabilities":{"add":["FOO","BAR"]}}},
        {"name":"b","securityContext":{"capabilities":{"add":["BAR","BAZ"]}}},
        {"name":"c","securityContext":{"capabilities":{"add":["NET_BIND_SERVICE","CHOWN"],"drop":["ALL","FOO"]}}}]}})",
     "unrestricted capabilities",
     R"(containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not )"
     R"(include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add)"},
    {"capabilities_restricted", 25, R"({"spec":{"os":{"name":"windows"},"containers":[{"name":"a"}]}})", "", ""},
    {"capabilities_restricted", 25, R"({"spec":{"os":{"name":"linux"},"containers":[{"name":"a"}]}})",
     "unrestricted capabilities", R"(container "a" must set securityContext.capabilities.drop=["ALL"])"},
    {"hostNamespaces", 0, R"({"spec":{"hostNetwork":true,"hostIPC":true,"hostPID":true}})", "host namespaces",
     "hostNetwork=true, hostPID=true, hostIPC=true"},
    {"hostPathVolumes", 0,
     R"({"spec":{"volumes":[{"name":"a","hostPath":{}},{"name":"b","hostPath":{}},{"name":"c","emptyDir":{}}]}})",
     "hostPath volumes", R"(volumes "a", "b")"},
    {"hostPorts", 0,
     R"({"spec":{"containers":[{"name":"a","ports":[{"hostPort":0}]},
        {"name":"b","ports":[{"hostPort":0},{"hostPort":20}]}]}})",
     "hostPort", R"(container "b" uses hostPort 20)"},
    {"hostPorts", 0,
     R"({"spec":{"containers":[{"name":"a","ports":[{"hostPort":0}]},
        {"name":"b","ports":[{"hostPort":0},{"hostPort":10},{"hostPort":20}]},
        {"name":"c","ports":[{"hostPort":0},{"hostPort":10},{"hostPort":30}]}]}})",
     "hostPort", R"(containers "b", "c" use hostPorts 10, 20, 30)"},
    {"hostProbesAndHostLifecycle", 34,
     R"({"spec":{"containers":[{"name":"a","livenessProbe":{"httpGet":{}},"readinessProbe":{"tcpSocket":{}},
        "lifecycle":{"postStart":{"httpGet":{}}}}]}})",
     "", ""},
    {"hostProbesAndHostLifecycle", 34,
     R"({"spec":{"containers":[{"name":"a","livenessProbe":{"httpGet":{"host":"127.0.0.1"}},
        "readinessProbe":{"tcpSocket":{"host":"::1"}},"startupProbe":{"httpGet":{"host":"localhost"}}}]}})",
     "probe or lifecycle host", R"(container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost")"},
    {"hostProbesAndHostLifecycle", 34,
     R"({"spec":{"containers":[{"name":"valid"},
        {"name":"invalid1","livenessProbe":{"httpGet":{"host":"a.com"}}},
        {"name":"invalid2","lifecycle":{"preStop":{"tcpSocket":{"host":"b.com"}}},
         "startupProbe":{"httpGet":{"host":"a.com"}}}]}})",
     "probe or lifecycle host", R"(containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com")"},
    {"hostProbesAndHostLifecycle", 34,
     R"({"spec":{"initContainers":[{"name":"init","livenessProbe":{"httpGet":{"host":"invalid.init.host"}}}]}})",
     "probe or lifecycle host", R"(container "init" uses probe or lifecycle host "invalid.init.host")"},
    {"privileged", 0,
     R"({"spec":{"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"c","securityContext":{"privileged":false}},{"name":"d","securityContext":{"privileged":true}},
        {"name":"e","securityContext":{"privileged":true}}]}})",
     "privileged", R"(containers "d", "e" must not set securityContext.privileged=true)"},
    {"procMount", 35,
     R"({"spec":{"hostUsers":true,"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"c","securityContext":{"procMount":"Default"}},{"name":"d","securityContext":{"procMount":"Unmasked"}},
        {"name":"e","securityContext":{"procMount":"other"}}]}})",
     "procMount", R"(containers "d", "e" must not set securityContext.procMount to "Unmasked", "other")"},
    {"procMount", 35,
     R"({"spec":{"hostUsers":false,"containers":[{"name":"d","securityContext":{"procMount":"Unmasked"}}]}})", "", ""},
    {"procMount_restricted", 35,
     R"({"spec":{"hostUsers":false,"containers":[{"name":"c","securityContext":{"procMount":"Default"}},
        {"name":"d","securityContext":{"procMount":"Unmasked"}},{"name":"e","securityContext":{"procMount":"other"}}]}})",
     "procMount", R"(containers "d", "e" must not set securityContext.procMount to "Unmasked", "other")"},
    {"restrictedVolumes", 0,
     R"({"spec":{"volumes":[{"name":"a1","emptyDir":{}},{"name":"a2","secret":{}},
        {"name":"a3","persistentVolumeClaim":{}},{"name":"a4","downwardAPI":{}},{"name":"a5","configMap":{}},
        {"name":"a6","projected":{}},{"name":"a7","csi":{}},{"name":"a8","ephemeral":{}},{"name":"a9","image":{}},
        {"name":"b1","hostPath":{}},{"name":"b2","gcePersistentDisk":{}},{"name":"b3","awsElasticBlockStore":{}},
        {"name":"b4","gitRepo":{}},{"name":"b5","nfs":{}},{"name":"b6","iscsi":{}},{"name":"b7","glusterfs":{}},
        {"name":"b8","rbd":{}},{"name":"b9","flexVolume":{}},{"name":"b10","cinder":{}},{"name":"b11","cephfs":{}},
        {"name":"b12","flocker":{}},{"name":"b13","fc":{}},{"name":"b14","azureFile":{}},
        {"name":"b15","vsphereVolume":{}},{"name":"b16","quobyte":{}},{"name":"b17","azureDisk":{}},
        {"name":"b18","photonPersistentDisk":{}},{"name":"b19","portworxVolume":{}},{"name":"b20","scaleIO":{}},
        {"name":"b21","storageos":{}},{"name":"c1"}]}})",
     "restricted volume types",
     R"(volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", )"
     R"("b16", "b17", "b18", "b19", "b20", "b21", "c1" use restricted volume types "awsElasticBlockStore", )"
     R"("azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", )"
     R"("glusterfs", "hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", )"
     R"("scaleIO", "storageos", "unknown", "vsphereVolume")"},
    {"runAsNonRoot", 35, R"({"spec":{"containers":[{"name":"a"}]}})", "runAsNonRoot != true",
     R"(pod or container "a" must set securityContext.runAsNonRoot=true)"},
    {"runAsNonRoot", 35, R"({"spec":{"securityContext":{"runAsNonRoot":false},"containers":[{"name":"a"}]}})",
     "runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false"},
    {"runAsNonRoot", 35,
     R"({"spec":{"securityContext":{"runAsNonRoot":true},"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"c","securityContext":{"runAsNonRoot":false}},{"name":"d","securityContext":{"runAsNonRoot":false}},
        {"name":"e","securityContext":{"runAsNonRoot":true}},{"name":"f","securityContext":{"runAsNonRoot":true}}]}})",
     "runAsNonRoot != true", R"(containers "c", "d" must not set securityContext.runAsNonRoot=false)"},
    {"runAsNonRoot", 35,
     R"({"spec":{"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"d","securityContext":{"runAsNonRoot":true}},{"name":"e","securityContext":{"runAsNonRoot":true}}]}})",
     "runAsNonRoot != true", R"(pod or containers "a", "b" must set securityContext.runAsNonRoot=true)"},
    {"runAsNonRoot", 35, R"({"spec":{"hostUsers":false}})", "", ""},
    // v1.0 drops the user-namespace relaxation (upstream: it moved to the v1.35 version).
    {"runAsNonRoot", 0, R"({"spec":{"hostUsers":false,"containers":[{"name":"a"}]}})", "runAsNonRoot != true",
     R"(pod or container "a" must set securityContext.runAsNonRoot=true)"},
    {"runAsUser", 35, R"({"spec":{"securityContext":{"runAsUser":0},"containers":[{"name":"a"}]}})", "runAsUser=0",
     "pod must not set runAsUser=0"},
    {"runAsUser", 35, R"({"spec":{"securityContext":{"runAsUser":1000},"containers":[{"name":"a"}]}})", "", ""},
    {"runAsUser", 35,
     R"({"spec":{"securityContext":{"runAsUser":1000},"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"c","securityContext":{"runAsUser":0}},{"name":"d","securityContext":{"runAsUser":0}},
        {"name":"e","securityContext":{"runAsUser":1}},{"name":"f","securityContext":{"runAsUser":1}}]}})",
     "runAsUser=0", R"(containers "c", "d" must not set runAsUser=0)"},
    {"runAsUser", 35, R"({"spec":{"hostUsers":false,"securityContext":{"runAsUser":0}}})", "", ""},
    {"seLinuxOptions", 31,
     R"({"spec":{"securityContext":{"seLinuxOptions":{"type":"foo","user":"bar","role":"baz"}},"containers":[
        {"name":"a","securityContext":{"seLinuxOptions":{"type":"container_t"}}},
        {"name":"b","securityContext":{"seLinuxOptions":{"type":"container_init_t"}}},
        {"name":"c","securityContext":{"seLinuxOptions":{"type":"container_kvm_t"}}},
        {"name":"d","securityContext":{"seLinuxOptions":{"type":"container_engine_t"}}},
        {"name":"e","securityContext":{"seLinuxOptions":{"type":"bar"}}},
        {"name":"f","securityContext":{"seLinuxOptions":{"user":"bar"}}},
        {"name":"g","securityContext":{"seLinuxOptions":{"role":"baz"}}}]}})",
     "seLinuxOptions",
     R"(pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; )"
     "user may not be set; role may not be set"},
    {"seLinuxOptions", 31, R"({"spec":{"securityContext":{"seLinuxOptions":{"role":"bad"}}}})", "seLinuxOptions",
     "pod set forbidden securityContext.seLinuxOptions: role may not be set"},
    // container_engine_t is allowed from v1.31 only.
    {"seLinuxOptions", 0,
     R"({"spec":{"containers":[{"name":"d","securityContext":{"seLinuxOptions":{"type":"container_engine_t"}}}]}})",
     "seLinuxOptions", R"(container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t")"},
    {"seccompProfile_baseline", 0,
     R"({"metadata":{"annotations":{"seccomp.security.alpha.kubernetes.io/pod":"unconfined",
        "container.seccomp.security.alpha.kubernetes.io/a":"unconfined",
        "container.seccomp.security.alpha.kubernetes.io/b":"unknown"}},
        "spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}})",
     "seccompProfile",
     R"(forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", )"
     R"(container.seccomp.security.alpha.kubernetes.io/b="unknown", )"
     R"(seccomp.security.alpha.kubernetes.io/pod="unconfined")"},
    {"seccompProfile_baseline", 19,
     R"({"spec":{"securityContext":{"seccompProfile":{"type":"Unconfined"}},"containers":[{"name":"a"},
        {"name":"b","securityContext":{}},{"name":"c","securityContext":{"seccompProfile":{"type":"Unconfined"}}},
        {"name":"d","securityContext":{"seccompProfile":{"type":"Unconfined"}}},
        {"name":"e","securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}]}})",
     "seccompProfile",
     R"(pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined")"},
    {"seccompProfile_restricted", 25, R"({"spec":{"containers":[{"name":"a"}]}})", "seccompProfile",
     R"(pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"},
    {"seccompProfile_restricted", 25, R"({"spec":{"os":{"name":"windows"},"containers":[{"name":"a"}]}})", "", ""},
    {"seccompProfile_restricted", 19,
     R"({"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"a"},
        {"name":"c","securityContext":{"seccompProfile":{"type":"Unconfined"}}},
        {"name":"d","securityContext":{"seccompProfile":{"type":"Unconfined"}}}]}})",
     "seccompProfile", R"(containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined")"},
    {"seccompProfile_restricted", 19,
     R"({"spec":{"containers":[{"name":"a"},{"name":"b","securityContext":{}},
        {"name":"d","securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}]}})",
     "seccompProfile",
     R"(pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"},
    {"sysctls", 0, R"({"spec":{"securityContext":{"sysctls":[{"name":"a"},{"name":"b"}]}}})", "forbidden sysctls",
     "a, b"},
    {"sysctls", 0, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.ip_local_reserved_ports"}]}}})",
     "forbidden sysctls", "net.ipv4.ip_local_reserved_ports"},
    {"sysctls", 27, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.ip_local_reserved_ports"}]}}})", "",
     ""},
    {"sysctls", 27, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.tcp_keepalive_time"}]}}})",
     "forbidden sysctls", "net.ipv4.tcp_keepalive_time"},
    {"sysctls", 29, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.tcp_keepalive_probes"}]}}})", "", ""},
    {"sysctls", 32, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.tcp_wmem"}]}}})", "", ""},
    {"sysctls", 32, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.tcp_notsent_lowat"}]}}})",
     "forbidden sysctls", "net.ipv4.tcp_notsent_lowat"},
    {"sysctls", 37, R"({"spec":{"securityContext":{"sysctls":[{"name":"net.ipv4.tcp_notsent_lowat"}]}}})", "", ""},
    {"windowsHostProcess", 0,
     R"({"spec":{"securityContext":{"windowsOptions":{"hostProcess":true}},"containers":[{"name":"a"},
        {"name":"b","securityContext":{}},{"name":"c","securityContext":{"windowsOptions":{}}},
        {"name":"d","securityContext":{"windowsOptions":{"hostProcess":false}}},
        {"name":"e","securityContext":{"windowsOptions":{"hostProcess":true}}},
        {"name":"f","securityContext":{"windowsOptions":{"hostProcess":true}}}]}})",
     "hostProcess", R"(pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true)"},
};

TEST(PodSecurityChecks, EachCheckJudgesUpstreamsCasesWithItsWords) {
  for (const CheckCase& c : kCases) {
    SCOPED_TRACE(std::string(c.check) + " v1." + std::to_string(c.minor) + ": " + c.pod);
    const json pod = json::parse(c.pod);
    const CheckResult result = versioned(c.check, c.minor).check(pod.value("metadata", json::object()), pod["spec"]);
    EXPECT_EQ(result.allowed, std::string(c.reason).empty());
    EXPECT_EQ(result.reason, c.reason);
    EXPECT_EQ(result.detail, c.detail);
  }
}

TEST(PodSecurityChecks, TheTableIsWellFormedAndNamesItsUpstreamFiles) {
  EXPECT_NO_THROW(PodSecurityEvaluator{pod_security_checks()});
  std::set<std::string> ids;
  for (const PodSecurityCheck& check : pod_security_checks()) ids.insert(check.id);
  EXPECT_EQ(ids.size(), 19u) << "every check of policy/ (check_*.go)";
  for (const PodSecurityCheck& check : pod_security_checks()) {
    EXPECT_EQ(check.source.rfind("policy/check_", 0), 0u) << check.id;
    for (const VersionedCheck& version : check.versions) {
      for (const std::string& overridden : version.overrides) EXPECT_TRUE(ids.count(overridden)) << overridden;
    }
  }
}

// registry_test.go TestCheckRegistry: generated checks whose reason names their id and version.
PodSecurityCheck generated(const std::string& id, PodSecurityLevel level, std::vector<int> minors,
                           std::vector<std::string> overrides = {}) {
  PodSecurityCheck check{id, level, {}, ""};
  for (int minor : minors) {
    const std::string reason = id + ":v1." + std::to_string(minor);
    check.versions.push_back({minor,
                              [reason](const json&, const json&) {
                                return CheckResult{false, reason, ""};
                              },
                              overrides});
  }
  return check;
}

std::vector<std::string> reasons(const PodSecurityEvaluator& evaluator, PodSecurityLevel level, const char* version) {
  PolicyVersion v;
  if (std::string(version) != "latest") v = {false, std::stoll(std::string(version).substr(3))};
  std::vector<std::string> out;
  for (const CheckResult& r : evaluator.evaluate({level, v}, json::object(), json::object())) out.push_back(r.reason);
  return out;
}

TEST(PodSecurityRegistry, ChecksApplyFromTheirVersionAndRestrictedOnesReplaceWhatTheyOverride) {
  using L = PodSecurityLevel;
  PodSecurityCheck multi = generated("i", L::kRestricted, {10, 21});
  multi.versions[0].overrides = {"c"};
  multi.versions[1].overrides = {"d"};
  const PodSecurityEvaluator evaluator(
      {generated("a", L::kBaseline, {0}), generated("b", L::kBaseline, {10}), generated("c", L::kBaseline, {0, 5, 10}),
       generated("d", L::kBaseline, {11, 15, 20}), generated("e", L::kRestricted, {0}),
       generated("f", L::kRestricted, {12, 16, 21}), generated("g", L::kRestricted, {10}, {"a"}),
       generated("h", L::kRestricted, {0}, {"b"}), multi});
  using V = std::vector<std::string>;
  EXPECT_EQ(reasons(evaluator, L::kPrivileged, "latest"), V{});
  EXPECT_EQ(reasons(evaluator, L::kBaseline, "v1.0"), (V{"a:v1.0", "c:v1.0"}));
  EXPECT_EQ(reasons(evaluator, L::kBaseline, "v1.4"), (V{"a:v1.0", "c:v1.0"}));
  EXPECT_EQ(reasons(evaluator, L::kBaseline, "v1.5"), (V{"a:v1.0", "c:v1.5"}));
  EXPECT_EQ(reasons(evaluator, L::kBaseline, "v1.11"), (V{"a:v1.0", "b:v1.10", "c:v1.10", "d:v1.11"}));
  EXPECT_EQ(reasons(evaluator, L::kBaseline, "latest"), (V{"a:v1.0", "b:v1.10", "c:v1.10", "d:v1.20"}));
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "v1.0"), (V{"a:v1.0", "c:v1.0", "e:v1.0", "h:v1.0"}));
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "v1.5"), (V{"a:v1.0", "c:v1.5", "e:v1.0", "h:v1.0"}));
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "v1.10"), (V{"e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"}));
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "v1.11"), (V{"d:v1.11", "e:v1.0", "g:v1.10", "h:v1.0", "i:v1.10"}));
  const V latest = {"c:v1.10", "e:v1.0", "f:v1.21", "g:v1.10", "h:v1.0", "i:v1.21"};
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "latest"), latest);
  EXPECT_EQ(reasons(evaluator, L::kRestricted, "v1.10000"), latest);
}

TEST(PodSecurityRegistry, AMalformedTableIsRefused) {
  using L = PodSecurityLevel;
  EXPECT_THROW(PodSecurityEvaluator({generated("a", L::kBaseline, {0}), generated("a", L::kBaseline, {1})}),
               InvalidArgument);
  EXPECT_THROW(PodSecurityEvaluator({generated("a", L::kBaseline, {5, 5})}), InvalidArgument);
  EXPECT_THROW(PodSecurityEvaluator({generated("a", L::kBaseline, {0}, {"b"})}), InvalidArgument);
  EXPECT_THROW(PodSecurityEvaluator({generated("a", L::kRestricted, {0}), generated("b", L::kRestricted, {0}, {"a"})}),
               InvalidArgument);
}

// check_hostProbesAndhostLifecycle_test.go TestHostProbesAndHostLifecycleEmulation: an apiserver emulating an
// older version reads "latest" and newer versions as its own.
TEST(PodSecurityRegistry, AnEmulatedVersionCapsLatest) {
  const json spec = json::parse(R"({"containers":[{"name":"a","startupProbe":{"httpGet":{"host":"localhost"}}}]})");
  for (auto [emulated, active] : {std::pair<std::optional<int>, bool>{std::nullopt, true}, {34, true}, {33, false}}) {
    SCOPED_TRACE(emulated ? std::to_string(*emulated) : "none");
    const PodSecurityEvaluator evaluator(pod_security_checks(), emulated);
    auto allowed = [&](PolicyVersion version) {
      const std::vector<CheckResult> results =
          evaluator.evaluate({PodSecurityLevel::kBaseline, version}, json::object(), spec);
      return forbidden_detail(results).empty();
    };
    EXPECT_EQ(allowed({}), !active);
    EXPECT_EQ(allowed({false, 34}), !active);
    EXPECT_TRUE(allowed({false, 33}));
  }
}

TEST(PodSecurityRegistry, RestrictedLatestRunsTheStrictFormOfEachRule) {
  using V = std::vector<std::string>;
  const PodSecurityEvaluator newest(pod_security_checks());
  EXPECT_EQ(newest.checks_run({PodSecurityLevel::kRestricted, {}}),
            (V{"appArmorProfile:v1.0", "hostNamespaces:v1.0", "hostPorts:v1.0", "hostProbesAndHostLifecycle:v1.34",
               "privileged:v1.0", "seLinuxOptions:v1.31", "sysctls:v1.37", "windowsHostProcess:v1.0",
               "allowPrivilegeEscalation:v1.25", "capabilities_restricted:v1.25", "procMount_restricted:v1.35",
               "restrictedVolumes:v1.0", "runAsNonRoot:v1.35", "runAsUser:v1.35", "seccompProfile_restricted:v1.25"}));
  // The stand-in says it is v1.32 (version_info()): its "latest" is v1.32's.
  EXPECT_EQ(standin_pod_security().checks_run({PodSecurityLevel::kBaseline, {}}),
            (V{"appArmorProfile:v1.0", "capabilities_baseline:v1.0", "hostNamespaces:v1.0", "hostPathVolumes:v1.0",
               "hostPorts:v1.0", "privileged:v1.0", "procMount:v1.0", "seLinuxOptions:v1.31",
               "seccompProfile_baseline:v1.19", "sysctls:v1.32", "windowsHostProcess:v1.0"}));
}

// test/fixtures.go: the minimal pod each level admits at each version the restricted rules changed at, and that the
// previous version's minimal pod is refused by the next one.
TEST(PodSecurityFixtures, TheMinimalValidPodsPassTheirLevelAtTheirVersion) {
  const PodSecurityEvaluator evaluator(pod_security_checks());
  json baseline = json::parse(R"({"initContainers":[{"name":"initcontainer1","image":"registry.k8s.io/pause"}],
                                  "containers":[{"name":"container1","image":"registry.k8s.io/pause"}]})");
  json restricted_1_0 = baseline;
  restricted_1_0["securityContext"] = {{"runAsNonRoot", true}};
  json restricted_1_8 = restricted_1_0;
  for (const char* list : {"containers", "initContainers"}) {
    restricted_1_8[list][0]["securityContext"] = {{"allowPrivilegeEscalation", false}};
  }
  json restricted_1_19 = restricted_1_8;
  restricted_1_19["securityContext"]["seccompProfile"] = {{"type", "RuntimeDefault"}};
  json restricted_1_22 = restricted_1_19;
  for (const char* list : {"containers", "initContainers"}) {
    restricted_1_22[list][0]["securityContext"]["capabilities"] = {{"drop", {"ALL"}}};
  }
  json windows_1_25 = restricted_1_0;
  windows_1_25["os"] = {{"name", "windows"}};
  auto passes = [&](PodSecurityLevel level, PolicyVersion version, const json& spec) {
    return forbidden_detail(evaluator.evaluate({level, version}, json::object(), spec));
  };
  using L = PodSecurityLevel;
  EXPECT_EQ(passes(L::kBaseline, {}, baseline), "");
  EXPECT_EQ(passes(L::kBaseline, {false, 0}, baseline), "");
  EXPECT_EQ(passes(L::kRestricted, {false, 0}, restricted_1_0), "");
  EXPECT_EQ(passes(L::kRestricted, {false, 8}, restricted_1_8), "");
  EXPECT_EQ(passes(L::kRestricted, {false, 19}, restricted_1_19), "");
  EXPECT_EQ(passes(L::kRestricted, {false, 22}, restricted_1_22), "");
  EXPECT_EQ(passes(L::kRestricted, {}, restricted_1_22), "");
  EXPECT_EQ(passes(L::kRestricted, {}, windows_1_25), "");
  EXPECT_EQ(passes(L::kRestricted, {false, 8}, restricted_1_0),
            "allowPrivilegeEscalation != false (containers \"initcontainer1\", \"container1\" must set "
            "securityContext.allowPrivilegeEscalation=false)");
  EXPECT_EQ(passes(L::kRestricted, {false, 22}, restricted_1_19),
            "unrestricted capabilities (containers \"initcontainer1\", \"container1\" must set "
            "securityContext.capabilities.drop=[\"ALL\"])");
  EXPECT_NE(passes(L::kRestricted, {false, 24}, windows_1_25), "") << "windows pods are exempt from v1.25";
}

}  // namespace
}  // namespace torus::standin

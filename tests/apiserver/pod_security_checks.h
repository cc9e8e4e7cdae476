#pragma once
// The Pod Security Standards as checks, one row per check of k8s.io/pod-security-admission's policy/ folder (the
// library kube-apiserver's PodSecurity admission plugin runs): its id, level, the versions its rule changed at and,
// per version, the function that judges a pod. The rules and their messages are taken from that library's check_*.go
// files (named in each row's `source`); pod_security.h evaluates them per namespace policy.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace torus::standin {

using json = nlohmann::json;

enum class PodSecurityLevel { kPrivileged, kBaseline, kRestricted };

// One check's verdict on a pod: `reason` ("runAsNonRoot != true") and `detail` ("pod or container \"a\" must set
// securityContext.runAsNonRoot=true") are the library's ForbiddenReason and ForbiddenDetail.
struct CheckResult {
  bool allowed = true;
  std::string reason;
  std::string detail;
};

// Judges a pod (or a pod template) by its metadata and spec, both JSON as the API serves them.
using CheckPodFn = std::function<CheckResult(const json& metadata, const json& spec)>;

struct VersionedCheck {
  int minimum_minor = 0;  // applies from v1.<minimum_minor> until the check's next version
  CheckPodFn check;
  // Baseline checks this restricted check replaces at this version (its stricter form of the same rule).
  std::vector<std::string> overrides;
};

struct PodSecurityCheck {
  std::string id;  // "runAsNonRoot": the library's CheckID
  PodSecurityLevel level = PodSecurityLevel::kBaseline;
  std::vector<VersionedCheck> versions;  // strictly increasing minimum_minor
  std::string source;                    // the upstream file: "policy/check_runAsNonRoot.go"
};

// Every check of the library's DefaultChecks(), in its rows' order.
const std::vector<PodSecurityCheck>& pod_security_checks();

}  // namespace torus::standin

#pragma once
// The PodSecurity admission plugin as kube-apiserver runs it (k8s.io/pod-security-admission: api/helpers.go for the
// namespace labels, policy/registry.go for which checks apply at a level and version, admission/admission.go for the
// decisions and their words), over the checks of pod_security_checks.h.
//
// A namespace's labels pod-security.kubernetes.io/{enforce,warn,audit}[-version] set its policy (default:
// privileged, latest). A pod created or updated in it that violates the enforce level is refused, 403:
//   pods "w-0" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (...), ...
// one that violates the warn level (which defaults to a stricter enforce level) is admitted with a Warning
// "would violate PodSecurity ...". Workloads (Deployments, ReplicaSets) only get the warning for their pod template.
// There is no audit log: the audit level is parsed and validated, nothing more.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/pod_security_checks.h"

namespace torus::standin {

// "latest", or v1.<minor>.
struct PolicyVersion {
  bool latest = true;
  int64_t minor = 0;
  std::string text() const;
};

struct LevelVersion {
  PodSecurityLevel level = PodSecurityLevel::kPrivileged;
  PolicyVersion version;
  std::string text() const;  // "restricted:latest", "baseline:v1.25"
  bool operator==(const LevelVersion& other) const;
};

struct PodSecurityPolicy {
  LevelVersion enforce, audit, warn;
};

// A namespace's policy, and what is wrong with its labels (a bad enforce level reads as restricted, bad warn and
// audit levels as privileged, a bad version as latest, as upstream fails closed for enforce and open for the others).
struct NamespacePolicy {
  PodSecurityPolicy policy;
  std::vector<Cause> errors;  // metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: ...
};
NamespacePolicy namespace_policy(const json& labels);

// The checks that apply to a level at a version, run in the library's order (baseline ids sorted, then restricted
// ids sorted), a restricted check replacing the baseline checks it overrides.
class PodSecurityEvaluator {
 public:
  // `emulated_minor`: the apiserver's own version, which "latest" and newer versions are read as (upstream's
  // emulation version); without it, the newest check's version.
  explicit PodSecurityEvaluator(std::vector<PodSecurityCheck> checks, std::optional<int> emulated_minor = std::nullopt);

  std::vector<CheckResult> evaluate(const LevelVersion& policy, const json& metadata, const json& spec) const;
  // The ids of the checks evaluate() runs for `policy`, with the version of each: "runAsNonRoot:v1.0".
  std::vector<std::string> checks_run(const LevelVersion& policy) const;

 private:
  std::vector<std::pair<const PodSecurityCheck*, const VersionedCheck*>> applicable(const LevelVersion& policy) const;

  std::vector<PodSecurityCheck> checks_;
  int newest_minor_ = 0;
};

// The failed checks of `results`, as AggregateCheckResults joins them: "reason (detail), reason (detail)".
std::string forbidden_detail(const std::vector<CheckResult>& results);
// The failed checks' reasons alone: "reason, reason" (what namespace label warnings list per pod).
std::string forbidden_reasons(const std::vector<CheckResult>& results);

// The table of pod_security_checks(), at the stand-in's own Kubernetes version (discovery.h's version_info()).
const PodSecurityEvaluator& standin_pod_security();

// A pod create (`old_pod` null) or update in a namespace with `labels`: throws ApiError 403 when the enforce level
// refuses it, else adds the warn level's warning. Updates that change no container image or list are not checked.
void admit_pod_security(const PodSecurityEvaluator& evaluator, const json& labels, const json& pod, const json* old_pod,
                        std::vector<std::string>& warnings);
// A workload's create or update: the warn level's warning for its pod template (spec.template); never refused.
void warn_pod_template_security(const PodSecurityEvaluator& evaluator, const json& labels, const json& workload,
                                std::vector<std::string>& warnings);
// A namespace create (`old_namespace` null) or update: 422 for invalid pod-security labels (unless an update keeps
// the same errors); an update to a stricter enforce level warns of the existing `pods` that violate it.
void admit_namespace_pod_security(const PodSecurityEvaluator& evaluator, const json& ns, const json* old_namespace,
                                  const std::vector<const json*>& pods, std::vector<std::string>& warnings);

}  // namespace torus::standin

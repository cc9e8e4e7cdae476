#include "tests/apiserver/pod_security.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/util/error.h"
#include "tests/apiserver/discovery.h"
#include "tests/apiserver/json_fields.h"
#include "tests/apiserver/pod_security_wording.h"

namespace torus::standin {

namespace {

using namespace json_fields;
using namespace pod_security_wording;

constexpr const char* kLabelPrefix = "pod-security.kubernetes.io/";
// admission.go: a namespace's new enforce level is tried on at most this many of its pods.
constexpr size_t kNamespaceMaxPodsToCheck = 3000;

const char* level_name(PodSecurityLevel level) {
  switch (level) {
    case PodSecurityLevel::kPrivileged:
      return "privileged";
    case PodSecurityLevel::kBaseline:
      return "baseline";
    case PodSecurityLevel::kRestricted:
      return "restricted";
  }
  return "restricted";
}

// api/helpers.go CompareLevels: privileged < baseline < restricted.
int strictness(PodSecurityLevel level) { return static_cast<int>(level); }

Cause label_error(const std::string& label, const std::string& value, const std::string& why) {
  return {"FieldValueInvalid", "Invalid value: " + go_quote(value) + ": " + why, "metadata.labels[" + label + "]"};
}

// ParseLevel: an invalid level reads as restricted, with an error.
std::optional<PodSecurityLevel> parse_level(const std::string& text) {
  for (PodSecurityLevel level :
       {PodSecurityLevel::kPrivileged, PodSecurityLevel::kBaseline, PodSecurityLevel::kRestricted}) {
    if (text == level_name(level)) return level;
  }
  return std::nullopt;
}

// ParseVersion: "latest" or v1.N (^v1\.([0-9]|[1-9][0-9]*)$); anything else reads as latest, with an error.
std::optional<PolicyVersion> parse_version(const std::string& text) {
  if (text == "latest") return PolicyVersion{};
  const std::string digits = text.substr(std::min<size_t>(3, text.size()));
  if (text.compare(0, 3, "v1.") != 0 || digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos || (digits.size() > 1 && digits[0] == '0')) {
    return std::nullopt;
  }
  return PolicyVersion{false, std::stoll(digits)};
}

// One mode's level and version labels ("enforce", "enforce-version").
struct ModeLabels {
  std::optional<std::string> level;
  std::optional<std::string> version;
};

ModeLabels mode_labels(const json& labels, const std::string& mode) {
  ModeLabels out;
  const json& level = field_at(labels, (kLabelPrefix + mode).c_str());
  const json& version = field_at(labels, (kLabelPrefix + mode + "-version").c_str());
  if (level.is_string()) out.level = level.get<std::string>();
  if (version.is_string()) out.version = version.get<std::string>();
  return out;
}

// Reads one mode into `into`; a bad level becomes `fallback` (restricted for enforce, privileged for the others).
void read_mode(const json& labels, const std::string& mode, PodSecurityLevel fallback, LevelVersion& into,
               std::vector<Cause>& errors) {
  const ModeLabels given = mode_labels(labels, mode);
  if (given.level) {
    const std::optional<PodSecurityLevel> level = parse_level(*given.level);
    into.level = level.value_or(fallback);
    if (!level) {
      errors.push_back(
          label_error(kLabelPrefix + mode, *given.level, "must be one of privileged, baseline, restricted"));
    }
  }
  if (given.version) {
    const std::optional<PolicyVersion> version = parse_version(*given.version);
    into.version = version.value_or(PolicyVersion{});
    if (!version)
      errors.push_back(label_error(kLabelPrefix + mode + "-version", *given.version, "must be \"latest\" or \"v1.x\""));
  }
}

bool fully_privileged(const PodSecurityPolicy& policy) {
  return policy.enforce.level == PodSecurityLevel::kPrivileged && policy.audit.level == PodSecurityLevel::kPrivileged &&
         policy.warn.level == PodSecurityLevel::kPrivileged;
}

bool all_allowed(const std::vector<CheckResult>& results) {
  return std::all_of(results.begin(), results.end(), [](const CheckResult& r) { return r.allowed; });
}

std::string quoted(const LevelVersion& policy) { return "\"" + policy.text() + "\""; }

// An object's metadata (a pod's, a template's, a namespace's).
const json& metadata_of(const json& pod) { return field_at(pod, "metadata"); }
const json& pod_spec(const json& pod) { return field_at(pod, "spec"); }

// admission.go isSignificantPodUpdate: only a changed image or container list is checked again.
bool significant_pod_update(const json& pod, const json& old_pod) {
  const json& spec = pod_spec(pod);
  const json& old_spec = pod_spec(old_pod);
  for (const char* list : {"containers", "initContainers"}) {
    const json& now = field_at(spec, list);
    const json& before = field_at(old_spec, list);
    const size_t count = now.is_array() ? now.size() : 0;
    if (count != (before.is_array() ? before.size() : 0)) return true;
    for (size_t i = 0; i < count; ++i) {
      if (field_at(now[i], "image") != field_at(before[i], "image")) return true;
    }
  }
  for (const json& container : list_field(spec, "ephemeralContainers")) {
    const json* old_container = nullptr;
    for (const json& candidate : list_field(old_spec, "ephemeralContainers")) {
      if (field_at(candidate, "name") == field_at(container, "name")) old_container = &candidate;
      if (old_container) break;
    }
    if (!old_container || field_at(container, "image") != field_at(*old_container, "image")) return true;
  }
  return false;
}

enum class Enforce { kNo, kYes };

// admission.go EvaluatePod (without the audit annotations, which no audit log receives here).
void evaluate_pod(const PodSecurityEvaluator& evaluator, const PodSecurityPolicy& policy, const json& metadata,
                  const json& spec, const std::string& pod_name, Enforce enforce, std::vector<std::string>& warnings) {
  if (enforce == Enforce::kYes) {
    const std::vector<CheckResult> results = evaluator.evaluate(policy.enforce, metadata, spec);
    if (!all_allowed(results)) {
      throw ApiError(403, "Forbidden",
                     "pods \"" + pod_name + "\" is forbidden: violates PodSecurity " + quoted(policy.enforce) + ": " +
                         forbidden_detail(results),
                     StatusDetails{pod_name, "", "pods", {}, 0});
    }
    if (policy.warn == policy.enforce) return;  // the same evaluation, allowed
  }
  const std::vector<CheckResult> results = evaluator.evaluate(policy.warn, metadata, spec);
  if (!all_allowed(results)) {
    warnings.push_back("would violate PodSecurity " + quoted(policy.warn) + ": " + forbidden_detail(results));
  }
}

// admission.go prioritizePods: one pod per controller first, its controller's other pods after every such pod.
std::vector<const json*> prioritized_pods(const std::vector<const json*>& pods) {
  std::vector<const json*> first;
  std::vector<const json*> duplicates;
  std::set<std::string> controllers;
  for (const json* pod : pods) {
    std::string controller;
    for (const json& owner : list_field(metadata_of(*pod), "ownerReferences")) {
      if (field_at(owner, "controller") == true) controller = string_field(owner, "uid");
    }
    if (controller.empty() || controllers.insert(controller).second) {
      first.push_back(pod);
    } else {
      duplicates.push_back(pod);
    }
  }
  first.insert(first.end(), duplicates.begin(), duplicates.end());
  return first;
}

// admission.go EvaluatePodsInNamespace: which existing pods a stricter enforce level would refuse, grouped by their
// reasons, each group named by its lexically first pod.
std::vector<std::string> pods_violating(const PodSecurityEvaluator& evaluator, const std::string& ns,
                                        const LevelVersion& enforce, const std::vector<const json*>& pods) {
  std::vector<const json*> checked = prioritized_pods(pods);
  const size_t total = checked.size();
  if (checked.size() > kNamespaceMaxPodsToCheck) checked.resize(kNamespaceMaxPodsToCheck);
  std::vector<std::string> reasons_in_order;
  std::map<std::string, std::pair<std::string, size_t>> by_reasons;  // reasons -> (first pod name, pod count)
  for (const json* pod : checked) {
    const std::vector<CheckResult> results = evaluator.evaluate(enforce, metadata_of(*pod), pod_spec(*pod));
    if (all_allowed(results)) continue;
    const std::string reasons = forbidden_reasons(results);
    const std::string name = string_field(metadata_of(*pod), "name");
    auto [entry, added] = by_reasons.try_emplace(reasons, name, 0);
    if (added) reasons_in_order.push_back(reasons);
    if (name < entry->second.first) entry->second.first = name;
    ++entry->second.second;
  }
  std::vector<std::string> warnings;
  if (checked.size() < total) {
    warnings.push_back("new PodSecurity enforce level only checked against the first " +
                       std::to_string(checked.size()) + " of " + std::to_string(total) + " existing pods");
  }
  if (reasons_in_order.empty()) return warnings;
  warnings.push_back("existing pods in namespace " + go_quote(ns) + " violate the new PodSecurity enforce level " +
                     quoted(enforce));
  std::vector<std::string> decorated;
  for (const std::string& reasons : reasons_in_order) {
    const auto& [pod, count] = by_reasons[reasons];
    std::string others;
    if (count == 2) others = " (and 1 other pod)";
    if (count > 2) others = " (and " + std::to_string(count - 1) + " other pods)";
    decorated.push_back(pod + others + ": " + reasons);
  }
  std::sort(decorated.begin(), decorated.end());
  warnings.insert(warnings.end(), decorated.begin(), decorated.end());
  return warnings;
}

bool same_causes(const std::vector<Cause>& a, const std::vector<Cause>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Cause& x, const Cause& y) {
    return x.type == y.type && x.message == y.message && x.field == y.field;
  });
}

}  // namespace

std::string PolicyVersion::text() const { return latest ? "latest" : "v1." + std::to_string(minor); }

std::string LevelVersion::text() const { return std::string(level_name(level)) + ":" + version.text(); }

bool LevelVersion::operator==(const LevelVersion& other) const {
  return level == other.level && version.latest == other.version.latest &&
         (version.latest || version.minor == other.version.minor);
}

// api/helpers.go PolicyToEvaluate, from the default policy (privileged:latest for every mode).
NamespacePolicy namespace_policy(const json& labels) {
  NamespacePolicy out;
  PodSecurityPolicy& p = out.policy;
  read_mode(labels, "enforce", PodSecurityLevel::kRestricted, p.enforce, out.errors);
  read_mode(labels, "audit", PodSecurityLevel::kPrivileged, p.audit, out.errors);
  read_mode(labels, "warn", PodSecurityLevel::kPrivileged, p.warn, out.errors);
  const ModeLabels enforce = mode_labels(labels, "enforce");
  const ModeLabels warn = mode_labels(labels, "warn");
  const bool valid_enforce_level = enforce.level && parse_level(*enforce.level);
  // The warn level defaults to an explicitly set, stricter enforce level (and its version, unless warn has its own).
  if (!warn.level && valid_enforce_level && strictness(p.enforce.level) > strictness(p.warn.level)) {
    p.warn.level = p.enforce.level;
    if (!warn.version) p.warn.version = p.enforce.version;
  }
  return out;
}

PodSecurityEvaluator::PodSecurityEvaluator(std::vector<PodSecurityCheck> checks, std::optional<int> emulated_minor)
    : checks_(std::move(checks)) {
  std::set<std::string> ids;
  std::map<std::string, PodSecurityLevel> levels;
  for (const PodSecurityCheck& check : checks_) {
    const std::string where = "pod security check " + check.id + ": ";
    if (!ids.insert(check.id).second) throw InvalidArgument(where + "registered twice");
    if (check.level == PodSecurityLevel::kPrivileged)
      throw InvalidArgument(where + "level must be baseline or restricted");
    if (check.versions.empty()) throw InvalidArgument(where + "has no versions");
    for (size_t i = 1; i < check.versions.size(); ++i) {
      if (check.versions[i].minimum_minor <= check.versions[i - 1].minimum_minor) {
        throw InvalidArgument(where + "versions must be strictly increasing");
      }
    }
    levels[check.id] = check.level;
    newest_minor_ = std::max(newest_minor_, check.versions.back().minimum_minor);
  }
  for (const PodSecurityCheck& check : checks_) {
    for (const VersionedCheck& version : check.versions) {
      for (const std::string& overridden : version.overrides) {
        if (check.level != PodSecurityLevel::kRestricted) {
          throw InvalidArgument("pod security check " + check.id + ": only restricted checks may set overrides");
        }
        if (levels.count(overridden) && levels[overridden] != PodSecurityLevel::kBaseline) {
          throw InvalidArgument("pod security check " + check.id + ": overrides restricted check " + overridden);
        }
      }
    }
  }
  if (emulated_minor && *emulated_minor < newest_minor_) newest_minor_ = *emulated_minor;
  std::sort(checks_.begin(), checks_.end(), [](const PodSecurityCheck& a, const PodSecurityCheck& b) {
    return std::tie(a.level, a.id) < std::tie(b.level, b.id);
  });
}

// registry.go: the version read down to the newest known, each check at its newest version not after it, the
// baseline checks a restricted one overrides left out of restricted.
std::vector<std::pair<const PodSecurityCheck*, const VersionedCheck*>> PodSecurityEvaluator::applicable(
    const LevelVersion& policy) const {
  std::vector<std::pair<const PodSecurityCheck*, const VersionedCheck*>> out;
  if (policy.level == PodSecurityLevel::kPrivileged) return out;
  const int64_t minor = policy.version.latest ? newest_minor_ : std::min<int64_t>(policy.version.minor, newest_minor_);
  auto active = [minor](const PodSecurityCheck& check) {
    const VersionedCheck* found = nullptr;
    for (const VersionedCheck& version : check.versions) {
      if (version.minimum_minor <= minor) found = &version;
    }
    return found;
  };
  const bool restricted = policy.level == PodSecurityLevel::kRestricted;
  std::set<std::string> overridden;
  for (const PodSecurityCheck& check : checks_) {
    const VersionedCheck* version = active(check);
    if (restricted && check.level == PodSecurityLevel::kRestricted && version) {
      overridden.insert(version->overrides.begin(), version->overrides.end());
    }
  }
  for (const PodSecurityCheck& check : checks_) {
    const VersionedCheck* version = active(check);
    if (!version) continue;
    if (check.level == PodSecurityLevel::kBaseline && overridden.count(check.id)) continue;
    if (check.level == PodSecurityLevel::kRestricted && !restricted) continue;
    out.emplace_back(&check, version);
  }
  return out;
}

std::vector<CheckResult> PodSecurityEvaluator::evaluate(const LevelVersion& policy, const json& metadata,
                                                        const json& spec) const {
  std::vector<CheckResult> results;
  for (const auto& [check, version] : applicable(policy)) results.push_back(version->check(metadata, spec));
  return results;
}

std::vector<std::string> PodSecurityEvaluator::checks_run(const LevelVersion& policy) const {
  std::vector<std::string> out;
  for (const auto& [check, version] : applicable(policy)) {
    out.push_back(check->id + ":v1." + std::to_string(version->minimum_minor));
  }
  return out;
}

std::string forbidden_detail(const std::vector<CheckResult>& results) {
  std::string out;
  for (const CheckResult& r : results) {
    if (r.allowed) continue;
    if (!out.empty()) out += ", ";
    out += r.reason.empty() ? "unknown forbidden reason" : r.reason;
    if (!r.detail.empty()) out += " (" + r.detail + ")";
  }
  return out;
}

std::string forbidden_reasons(const std::vector<CheckResult>& results) {
  std::string out;
  for (const CheckResult& r : results) {
    if (r.allowed) continue;
    out += (out.empty() ? "" : ", ") + (r.reason.empty() ? std::string("unknown forbidden reason") : r.reason);
  }
  return out;
}

const PodSecurityEvaluator& standin_pod_security() {
  static const PodSecurityEvaluator evaluator(pod_security_checks(),
                                              std::stoi(version_info()["minor"].get<std::string>()));
  return evaluator;
}

void admit_pod_security(const PodSecurityEvaluator& evaluator, const json& labels, const json& pod, const json* old_pod,
                        std::vector<std::string>& warnings) {
  const NamespacePolicy ns = namespace_policy(labels);
  if (ns.errors.empty() && fully_privileged(ns.policy)) return;
  if (old_pod && !significant_pod_update(pod, *old_pod)) return;
  evaluate_pod(evaluator, ns.policy, metadata_of(pod), pod_spec(pod), string_field(metadata_of(pod), "name"),
               Enforce::kYes, warnings);
}

void warn_pod_template_security(const PodSecurityEvaluator& evaluator, const json& labels, const json& workload,
                                std::vector<std::string>& warnings) {
  const NamespacePolicy ns = namespace_policy(labels);
  const PodSecurityPolicy& p = ns.policy;
  if (ns.errors.empty() && p.warn.level == PodSecurityLevel::kPrivileged &&
      p.audit.level == PodSecurityLevel::kPrivileged) {
    return;
  }
  const json& pod_template = field_at(field_at(workload, "spec"), "template");
  if (pod_template.is_null()) return;
  evaluate_pod(evaluator, p, metadata_of(pod_template), pod_spec(pod_template), "", Enforce::kNo, warnings);
}

void admit_namespace_pod_security(const PodSecurityEvaluator& evaluator, const json& ns, const json* old_namespace,
                                  const std::vector<const json*>& pods, std::vector<std::string>& warnings) {
  const std::string name = string_field(metadata_of(ns), "name");
  const NamespacePolicy now = namespace_policy(field_at(metadata_of(ns), "labels"));
  if (!old_namespace) {
    if (!now.errors.empty()) throw invalid("Namespace", "", name, now.errors);
    return;
  }
  const NamespacePolicy before = namespace_policy(field_at(metadata_of(*old_namespace), "labels"));
  if (!now.errors.empty() && (before.errors.empty() || !same_causes(now.errors, before.errors))) {
    throw invalid("Namespace", "", name, now.errors);
  }
  const LevelVersion& enforce = now.policy.enforce;
  const LevelVersion& old_enforce = before.policy.enforce;
  if (enforce == old_enforce || enforce.level == PodSecurityLevel::kPrivileged) return;
  const bool same_version = LevelVersion{enforce.level, old_enforce.version} == enforce;
  if (same_version && strictness(enforce.level) <= strictness(old_enforce.level)) return;  // relaxed
  const std::vector<std::string> found = pods_violating(evaluator, name, enforce, pods);
  warnings.insert(warnings.end(), found.begin(), found.end());
}

}  // namespace torus::standin

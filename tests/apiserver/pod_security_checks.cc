#include "tests/apiserver/pod_security_checks.h"

#include <cstdint>
#include <optional>
#include <set>

#include "tests/apiserver/json_fields.h"
#include "tests/apiserver/pod_security_wording.h"

// Each check follows its upstream file in k8s.io/pod-security-admission/policy (named in its table row): the same
// fields, the same order of findings, the same words. Go's pointers are JSON's absent-or-null; its sets.String lists
// are sorted (std::set), its slices keep the pod's order.
namespace torus::standin {

namespace {

using namespace json_fields;
using namespace pod_security_wording;
using Names = std::vector<std::string>;
using Sorted = std::set<std::string>;

// visitor.go: init containers, containers, then ephemeral containers.
void visit_containers(const json& spec, const std::function<void(const json&)>& visit) {
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    for (const json& container : list_field(spec, list)) visit(container);
  }
}

std::string container_name(const json& container) { return string_field(container, "name"); }

CheckResult forbid(std::string reason, std::string detail) { return {false, std::move(reason), std::move(detail)}; }

// helpers.go relaxPolicyForUserNamespacePod: hostUsers: false.
bool in_user_namespace(const json& spec) { return bool_field(spec, "hostUsers") == false; }

bool windows_pod(const json& spec) { return string_field(field_at(spec, "os"), "name") == "windows"; }

// --- check_allowPrivilegeEscalation.go ---------------------------------------------------------------------------

CheckResult allow_privilege_escalation_1_8(const json&, const json& spec) {
  Names bad;
  visit_containers(spec, [&](const json& c) {
    if (bool_field(field_at(c, "securityContext"), "allowPrivilegeEscalation") != false)
      bad.push_back(container_name(c));
  });
  if (bad.empty()) return {};
  return forbid("allowPrivilegeEscalation != false",
                containers_phrase(bad) + " must set securityContext.allowPrivilegeEscalation=false");
}

CheckResult allow_privilege_escalation_1_25(const json& metadata, const json& spec) {
  if (windows_pod(spec)) return {};
  return allow_privilege_escalation_1_8(metadata, spec);
}

// --- check_appArmorProfile.go ------------------------------------------------------------------------------------

bool allowed_apparmor_annotation(const std::string& profile) {
  return profile.empty() || profile == "runtime/default" || has_prefix(profile, "localhost/");
}

bool allowed_apparmor_type(const std::string& type) { return type == "RuntimeDefault" || type == "Localhost"; }

CheckResult apparmor_profile_1_0(const json& metadata, const json& spec) {
  Names setters;
  Sorted bad_values;
  const json& pod_profile = field_at(field_at(spec, "securityContext"), "appArmorProfile");
  if (!pod_profile.is_null() && !allowed_apparmor_type(string_field(pod_profile, "type"))) {
    setters.push_back("pod");
    bad_values.insert(string_field(pod_profile, "type"));
  }
  Names bad_containers;
  visit_containers(spec, [&](const json& c) {
    const json& profile = field_at(field_at(c, "securityContext"), "appArmorProfile");
    if (!profile.is_null() && !allowed_apparmor_type(string_field(profile, "type"))) {
      bad_containers.push_back(container_name(c));
      bad_values.insert(string_field(profile, "type"));
    }
  });
  if (!bad_containers.empty()) setters.push_back(containers_phrase(bad_containers));
  Sorted annotations;
  static const json no_annotations = json::object();
  const json& all_annotations = field_at(metadata, "annotations");
  for (const auto& [key, value] : (all_annotations.is_object() ? all_annotations : no_annotations).items()) {
    const std::string profile = value.is_string() ? value.get<std::string>() : "";
    if (has_prefix(key, "container.apparmor.security.beta.kubernetes.io/") && !allowed_apparmor_annotation(profile)) {
      annotations.insert(key + "=" + go_quote(profile));
    }
  }
  Names values(bad_values.begin(), bad_values.end());
  values.insert(values.end(), annotations.begin(), annotations.end());
  if (!annotations.empty()) setters.push_back(pluralize("annotation", "annotations", annotations.size()));
  if (setters.empty()) return {};
  return forbid(pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", values.size()),
                join(setters, " and ") + " must not set AppArmor profile type to " + join_quote(values));
}

// --- check_capabilities_baseline.go ------------------------------------------------------------------------------

CheckResult capabilities_baseline_1_0(const json&, const json& spec) {
  static const Sorted allowed = {"AUDIT_WRITE", "CHOWN",  "DAC_OVERRIDE",     "FOWNER",  "FSETID",
                                 "KILL",        "MKNOD",  "NET_BIND_SERVICE", "SETFCAP", "SETGID",
                                 "SETPCAP",     "SETUID", "SYS_CHROOT"};
  Names bad;
  Sorted added;
  visit_containers(spec, [&](const json& c) {
    const json& capabilities = field_at(field_at(c, "securityContext"), "capabilities");
    if (capabilities.is_null()) return;
    bool valid = true;
    for (const json& capability : list_field(capabilities, "add")) {
      const std::string name = capability.is_string() ? capability.get<std::string>() : "";
      if (!allowed.count(name)) {
        valid = false;
        added.insert(name);
      }
    }
    if (!valid) bad.push_back(container_name(c));
  });
  if (bad.empty()) return {};
  return forbid("non-default capabilities", containers_phrase(bad) + " must not include " + join_quote(added) +
                                                " in securityContext.capabilities.add");
}

// --- check_capabilities_restricted.go ----------------------------------------------------------------------------

CheckResult capabilities_restricted_1_22(const json&, const json& spec) {
  Names missing_drop_all;
  Names adding_forbidden;
  Sorted forbidden;
  visit_containers(spec, [&](const json& c) {
    const json& capabilities = field_at(field_at(c, "securityContext"), "capabilities");
    if (capabilities.is_null()) {
      missing_drop_all.push_back(container_name(c));
      return;
    }
    bool dropped_all = false;
    for (const json& capability : list_field(capabilities, "drop")) dropped_all = dropped_all || capability == "ALL";
    if (!dropped_all) missing_drop_all.push_back(container_name(c));
    bool adds_forbidden = false;
    for (const json& capability : list_field(capabilities, "add")) {
      const std::string name = capability.is_string() ? capability.get<std::string>() : "";
      if (name != "NET_BIND_SERVICE") {
        adds_forbidden = true;
        forbidden.insert(name);
      }
    }
    if (adds_forbidden) adding_forbidden.push_back(container_name(c));
  });
  Names details;
  if (!missing_drop_all.empty()) {
    details.push_back(containers_phrase(missing_drop_all) + " must set securityContext.capabilities.drop=[\"ALL\"]");
  }
  if (!adding_forbidden.empty()) {
    details.push_back(containers_phrase(adding_forbidden) + " must not include " + join_quote(forbidden) +
                      " in securityContext.capabilities.add");
  }
  if (details.empty()) return {};
  return forbid("unrestricted capabilities", join(details, "; "));
}

CheckResult capabilities_restricted_1_25(const json& metadata, const json& spec) {
  if (windows_pod(spec)) return {};
  return capabilities_restricted_1_22(metadata, spec);
}

// --- check_hostNamespaces.go -------------------------------------------------------------------------------------

CheckResult host_namespaces_1_0(const json&, const json& spec) {
  Names shared;
  if (bool_field(spec, "hostNetwork") == true) shared.push_back("hostNetwork=true");
  if (bool_field(spec, "hostPID") == true) shared.push_back("hostPID=true");
  if (bool_field(spec, "hostIPC") == true) shared.push_back("hostIPC=true");
  if (shared.empty()) return {};
  return forbid("host namespaces", join(shared, ", "));
}

// --- check_hostPathVolumes.go ------------------------------------------------------------------------------------

CheckResult host_path_volumes_1_0(const json&, const json& spec) {
  Names volumes;
  for (const json& volume : list_field(spec, "volumes")) {
    if (has_field(volume, "hostPath")) volumes.push_back(string_field(volume, "name"));
  }
  if (volumes.empty()) return {};
  return forbid("hostPath volumes", pluralize("volume", "volumes", volumes.size()) + " " + join_quote(volumes));
}

// --- check_hostPorts.go ------------------------------------------------------------------------------------------

CheckResult host_ports_1_0(const json&, const json& spec) {
  Names bad;
  Sorted ports;
  visit_containers(spec, [&](const json& c) {
    bool valid = true;
    for (const json& port : list_field(c, "ports")) {
      const int64_t host_port = int_field(port, "hostPort").value_or(0);
      if (host_port != 0) {
        valid = false;
        ports.insert(std::to_string(host_port));
      }
    }
    if (!valid) bad.push_back(container_name(c));
  });
  if (bad.empty()) return {};
  return forbid("hostPort", containers_phrase(bad) + " " + pluralize("uses", "use", bad.size()) + " " +
                                pluralize("hostPort", "hostPorts", ports.size()) + " " + join(ports, ", "));
}

// --- check_hostProbesAndhostLifecycle.go -------------------------------------------------------------------------

// The hosts an httpGet or tcpSocket handler (a probe's, or a lifecycle hook's) names.
void handler_hosts(const json& handler, Sorted& hosts) {
  for (const char* action : {"httpGet", "tcpSocket"}) {
    const std::string host = string_field(field_at(handler, action), "host");
    if (!host.empty()) hosts.insert(host);
  }
}

CheckResult host_probes_and_host_lifecycle_1_34(const json&, const json& spec) {
  Sorted bad;
  Sorted hosts;
  visit_containers(spec, [&](const json& c) {
    Sorted found;
    for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"})
      handler_hosts(field_at(c, probe), found);
    for (const char* hook : {"postStart", "preStop"}) handler_hosts(field_at(field_at(c, "lifecycle"), hook), found);
    if (found.empty()) return;
    bad.insert(container_name(c));
    hosts.insert(found.begin(), found.end());
  });
  if (bad.empty()) return {};
  return forbid("probe or lifecycle host",
                pluralize("container", "containers", bad.size()) + " " + join_quote(bad) + " " +
                    pluralize("uses", "use", bad.size()) + " " +
                    pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.size()) + " " +
                    join_quote(hosts));
}

// --- check_privileged.go -----------------------------------------------------------------------------------------

CheckResult privileged_1_0(const json&, const json& spec) {
  Names bad;
  visit_containers(spec, [&](const json& c) {
    if (bool_field(field_at(c, "securityContext"), "privileged") == true) bad.push_back(container_name(c));
  });
  if (bad.empty()) return {};
  return forbid("privileged", containers_phrase(bad) + " must not set securityContext.privileged=true");
}

// --- check_procMount_baseline.go, check_procMount_restricted.go --------------------------------------------------

CheckResult proc_mount_1_0(const json&, const json& spec) {
  Names bad;
  Sorted types;
  visit_containers(spec, [&](const json& c) {
    const json& proc_mount = field_at(field_at(c, "securityContext"), "procMount");
    if (proc_mount.is_null()) return;
    const std::string type = proc_mount.is_string() ? proc_mount.get<std::string>() : "";
    if (type != "Default") {
      bad.push_back(container_name(c));
      types.insert(type);
    }
  });
  if (bad.empty()) return {};
  return forbid("procMount",
                containers_phrase(bad) + " must not set securityContext.procMount to " + join_quote(types));
}

CheckResult proc_mount_1_35_baseline(const json& metadata, const json& spec) {
  if (in_user_namespace(spec)) return {};
  return proc_mount_1_0(metadata, spec);
}

// --- check_restrictedVolumes.go ----------------------------------------------------------------------------------

CheckResult restricted_volumes_1_0(const json&, const json& spec) {
  static const char* const kAllowed[] = {"configMap", "csi",   "downwardAPI",           "emptyDir",
                                         "ephemeral", "image", "persistentVolumeClaim", "projected",
                                         "secret"};
  // In the upstream switch's order: a volume is named by the first of these it sets.
  static const char* const kRestricted[] = {"hostPath",
                                            "gcePersistentDisk",
                                            "awsElasticBlockStore",
                                            "gitRepo",
                                            "nfs",
                                            "iscsi",
                                            "glusterfs",
                                            "rbd",
                                            "flexVolume",
                                            "cinder",
                                            "cephfs",
                                            "flocker",
                                            "fc",
                                            "azureFile",
                                            "vsphereVolume",
                                            "quobyte",
                                            "azureDisk",
                                            "photonPersistentDisk",
                                            "portworxVolume",
                                            "scaleIO",
                                            "storageos"};
  Names bad;
  Sorted types;
  for (const json& volume : list_field(spec, "volumes")) {
    bool allowed = false;
    for (const char* source : kAllowed) allowed = allowed || has_field(volume, source);
    if (allowed) continue;
    bad.push_back(string_field(volume, "name"));
    std::string type = "unknown";
    for (const char* source : kRestricted) {
      if (has_field(volume, source)) {
        type = source;
        break;
      }
    }
    types.insert(type);
  }
  if (bad.empty()) return {};
  return forbid(
      "restricted volume types",
      pluralize("volume", "volumes", bad.size()) + " " + join_quote(bad) + " " + pluralize("uses", "use", bad.size()) +
          " " + pluralize("restricted volume type", "restricted volume types", types.size()) + " " + join_quote(types));
}

// --- check_runAsNonRoot.go ---------------------------------------------------------------------------------------

CheckResult run_as_non_root_1_0(const json&, const json& spec) {
  Names setters;
  bool pod_non_root = false;
  const std::optional<bool> pod_value = bool_field(field_at(spec, "securityContext"), "runAsNonRoot");
  if (pod_value == false) setters.push_back("pod");
  if (pod_value == true) pod_non_root = true;
  Names explicitly_bad;
  Names implicitly_bad;
  visit_containers(spec, [&](const json& c) {
    const std::optional<bool> value = bool_field(field_at(c, "securityContext"), "runAsNonRoot");
    if (value == false) explicitly_bad.push_back(container_name(c));
    if (!value && !pod_non_root) implicitly_bad.push_back(container_name(c));
  });
  if (!explicitly_bad.empty()) setters.push_back(containers_phrase(explicitly_bad));
  if (!setters.empty()) {
    return forbid("runAsNonRoot != true", join(setters, " and ") + " must not set securityContext.runAsNonRoot=false");
  }
  if (!implicitly_bad.empty()) {
    return forbid("runAsNonRoot != true",
                  "pod or " + containers_phrase(implicitly_bad) + " must set securityContext.runAsNonRoot=true");
  }
  return {};
}

CheckResult run_as_non_root_1_35(const json& metadata, const json& spec) {
  if (in_user_namespace(spec)) return {};
  return run_as_non_root_1_0(metadata, spec);
}

// --- check_runAsUser.go ------------------------------------------------------------------------------------------

CheckResult run_as_user_1_23(const json&, const json& spec) {
  Names setters;
  if (int_field(field_at(spec, "securityContext"), "runAsUser") == 0) setters.push_back("pod");
  Names bad;
  visit_containers(spec, [&](const json& c) {
    if (int_field(field_at(c, "securityContext"), "runAsUser") == 0) bad.push_back(container_name(c));
  });
  if (!bad.empty()) setters.push_back(containers_phrase(bad));
  if (setters.empty()) return {};
  return forbid("runAsUser=0", join(setters, " and ") + " must not set runAsUser=0");
}

CheckResult run_as_user_1_35(const json& metadata, const json& spec) {
  if (in_user_namespace(spec)) return {};
  return run_as_user_1_23(metadata, spec);
}

// --- check_seLinuxOptions.go -------------------------------------------------------------------------------------

CheckResult selinux_options(const json& spec, const Sorted& allowed_types) {
  Names setters;
  Sorted bad_types;
  bool set_user = false;
  bool set_role = false;
  auto valid = [&](const json& options) {
    bool ok = true;
    const std::string type = string_field(options, "type");
    if (!allowed_types.count(type)) {
      ok = false;
      bad_types.insert(type);
    }
    if (!string_field(options, "user").empty()) {
      ok = false;
      set_user = true;
    }
    if (!string_field(options, "role").empty()) {
      ok = false;
      set_role = true;
    }
    return ok;
  };
  const json& pod_options = field_at(field_at(spec, "securityContext"), "seLinuxOptions");
  if (!pod_options.is_null() && !valid(pod_options)) setters.push_back("pod");
  Names bad;
  visit_containers(spec, [&](const json& c) {
    const json& options = field_at(field_at(c, "securityContext"), "seLinuxOptions");
    if (!options.is_null() && !valid(options)) bad.push_back(container_name(c));
  });
  if (!bad.empty()) setters.push_back(containers_phrase(bad));
  if (setters.empty()) return {};
  Names data;
  if (!bad_types.empty()) data.push_back(pluralize("type", "types", bad_types.size()) + " " + join_quote(bad_types));
  if (set_user) data.push_back("user may not be set");
  if (set_role) data.push_back("role may not be set");
  return forbid("seLinuxOptions",
                join(setters, " and ") + " set forbidden securityContext.seLinuxOptions: " + join(data, "; "));
}

CheckResult selinux_options_1_0(const json&, const json& spec) {
  return selinux_options(spec, {"", "container_t", "container_init_t", "container_kvm_t"});
}

CheckResult selinux_options_1_31(const json&, const json& spec) {
  return selinux_options(spec, {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"});
}

// --- check_seccompProfile_baseline.go ----------------------------------------------------------------------------

bool valid_seccomp_type(const std::string& type) { return type == "Localhost" || type == "RuntimeDefault"; }

bool valid_seccomp_annotation(const std::string& value) {
  return value == "runtime/default" || value == "docker/default" || has_prefix(value, "localhost/");
}

// The alpha annotations, before securityContext.seccompProfile existed (v1.0 - v1.18).
CheckResult seccomp_profile_baseline_1_0(const json& metadata, const json& spec) {
  const json& annotations = field_at(metadata, "annotations");
  Sorted forbidden;
  auto check = [&](const std::string& key) {
    if (!annotations.is_object() || !annotations.contains(key)) return;
    const std::string value = string_field(annotations, key.c_str());
    if (!valid_seccomp_annotation(value)) forbidden.insert(key + "=" + go_quote(value));
  };
  check("seccomp.security.alpha.kubernetes.io/pod");
  visit_containers(
      spec, [&](const json& c) { check("container.seccomp.security.alpha.kubernetes.io/" + container_name(c)); });
  if (forbidden.empty()) return {};
  return forbid("seccompProfile",
                "forbidden " + pluralize("annotation", "annotations", forbidden.size()) + " " + join(forbidden, ", "));
}

// The pod's and the containers' explicitly bad profile types; the restricted check also lists the containers left
// without a profile while the pod sets none.
struct SeccompFindings {
  Names setters;
  Sorted bad_values;
  Names unset_containers;
};

SeccompFindings seccomp_findings(const json& spec) {
  SeccompFindings found;
  bool pod_set = false;
  const json& pod_profile = field_at(field_at(spec, "securityContext"), "seccompProfile");
  if (!pod_profile.is_null()) {
    if (valid_seccomp_type(string_field(pod_profile, "type"))) {
      pod_set = true;
    } else {
      found.setters.push_back("pod");
      found.bad_values.insert(string_field(pod_profile, "type"));
    }
  }
  Names bad;
  visit_containers(spec, [&](const json& c) {
    const json& profile = field_at(field_at(c, "securityContext"), "seccompProfile");
    if (profile.is_null()) {
      if (!pod_set) found.unset_containers.push_back(container_name(c));
    } else if (!valid_seccomp_type(string_field(profile, "type"))) {
      bad.push_back(container_name(c));
      found.bad_values.insert(string_field(profile, "type"));
    }
  });
  if (!bad.empty()) found.setters.push_back(containers_phrase(bad));
  return found;
}

CheckResult seccomp_bad_types(const SeccompFindings& found) {
  return forbid("seccompProfile", join(found.setters, " and ") +
                                      " must not set securityContext.seccompProfile.type to " +
                                      join_quote(found.bad_values));
}

CheckResult seccomp_profile_baseline_1_19(const json&, const json& spec) {
  const SeccompFindings found = seccomp_findings(spec);
  if (found.setters.empty()) return {};
  return seccomp_bad_types(found);
}

// --- check_seccompProfile_restricted.go --------------------------------------------------------------------------

CheckResult seccomp_profile_restricted_1_19(const json&, const json& spec) {
  const SeccompFindings found = seccomp_findings(spec);
  if (!found.setters.empty()) return seccomp_bad_types(found);
  if (found.unset_containers.empty()) return {};
  return forbid("seccompProfile", "pod or " + containers_phrase(found.unset_containers) +
                                      " must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
                                      "\"Localhost\"");
}

CheckResult seccomp_profile_restricted_1_25(const json& metadata, const json& spec) {
  if (windows_pod(spec)) return {};
  return seccomp_profile_restricted_1_19(metadata, spec);
}

// --- check_sysctls.go --------------------------------------------------------------------------------------------

CheckPodFn sysctls_allowing(Sorted allowed) {
  return [allowed = std::move(allowed)](const json&, const json& spec) -> CheckResult {
    Names forbidden;
    for (const json& sysctl : list_field(field_at(spec, "securityContext"), "sysctls")) {
      if (!allowed.count(string_field(sysctl, "name"))) forbidden.push_back(string_field(sysctl, "name"));
    }
    if (forbidden.empty()) return {};
    return forbid("forbidden sysctls", join(forbidden, ", "));
  };
}

Sorted sysctls_allowed(int minor) {
  Sorted allowed = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                    "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"};
  if (minor >= 27) allowed.insert("net.ipv4.ip_local_reserved_ports");
  if (minor >= 29) {
    allowed.insert({"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                    "net.ipv4.tcp_keepalive_probes"});
  }
  if (minor >= 32) allowed.insert({"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"});
  if (minor >= 37) allowed.insert({"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"});
  return allowed;
}

// --- check_windowsHostProcess.go ---------------------------------------------------------------------------------

CheckResult windows_host_process_1_0(const json&, const json& spec) {
  Names bad;
  visit_containers(spec, [&](const json& c) {
    if (bool_field(field_at(field_at(c, "securityContext"), "windowsOptions"), "hostProcess") == true) {
      bad.push_back(container_name(c));
    }
  });
  Names setters;
  if (bool_field(field_at(field_at(spec, "securityContext"), "windowsOptions"), "hostProcess") == true)
    setters.push_back("pod");
  if (!bad.empty()) setters.push_back(containers_phrase(bad));
  if (setters.empty()) return {};
  return forbid("hostProcess",
                join(setters, " and ") + " must not set securityContext.windowsOptions.hostProcess=true");
}

}  // namespace

const std::vector<PodSecurityCheck>& pod_security_checks() {
  using L = PodSecurityLevel;
  static const std::vector<PodSecurityCheck> checks = {
      {"allowPrivilegeEscalation",
       L::kRestricted,
       {{8, allow_privilege_escalation_1_8, {}}, {25, allow_privilege_escalation_1_25, {}}},
       "policy/check_allowPrivilegeEscalation.go"},
      {"appArmorProfile", L::kBaseline, {{0, apparmor_profile_1_0, {}}}, "policy/check_appArmorProfile.go"},
      {"capabilities_baseline",
       L::kBaseline,
       {{0, capabilities_baseline_1_0, {}}},
       "policy/check_capabilities_baseline.go"},
      {"capabilities_restricted",
       L::kRestricted,
       {{22, capabilities_restricted_1_22, {"capabilities_baseline"}},
        {25, capabilities_restricted_1_25, {"capabilities_baseline"}}},
       "policy/check_capabilities_restricted.go"},
      {"hostNamespaces", L::kBaseline, {{0, host_namespaces_1_0, {}}}, "policy/check_hostNamespaces.go"},
      {"hostPathVolumes", L::kBaseline, {{0, host_path_volumes_1_0, {}}}, "policy/check_hostPathVolumes.go"},
      {"hostPorts", L::kBaseline, {{0, host_ports_1_0, {}}}, "policy/check_hostPorts.go"},
      {"hostProbesAndHostLifecycle",
       L::kBaseline,
       {{34, host_probes_and_host_lifecycle_1_34, {}}},
       "policy/check_hostProbesAndhostLifecycle.go"},
      {"privileged", L::kBaseline, {{0, privileged_1_0, {}}}, "policy/check_privileged.go"},
      {"procMount",
       L::kBaseline,
       {{0, proc_mount_1_0, {}}, {35, proc_mount_1_35_baseline, {}}},
       "policy/check_procMount_baseline.go"},
      {"procMount_restricted",
       L::kRestricted,
       {{35, proc_mount_1_0, {"procMount"}}},
       "policy/check_procMount_restricted.go"},
      {"restrictedVolumes",
       L::kRestricted,
       {{0, restricted_volumes_1_0, {"hostPathVolumes"}}},
       "policy/check_restrictedVolumes.go"},
      {"runAsNonRoot",
       L::kRestricted,
       {{0, run_as_non_root_1_0, {}}, {35, run_as_non_root_1_35, {}}},
       "policy/check_runAsNonRoot.go"},
      {"runAsUser",
       L::kRestricted,
       {{23, run_as_user_1_23, {}}, {35, run_as_user_1_35, {}}},
       "policy/check_runAsUser.go"},
      {"seLinuxOptions",
       L::kBaseline,
       {{0, selinux_options_1_0, {}}, {31, selinux_options_1_31, {}}},
       "policy/check_seLinuxOptions.go"},
      {"seccompProfile_baseline",
       L::kBaseline,
       {{0, seccomp_profile_baseline_1_0, {}}, {19, seccomp_profile_baseline_1_19, {}}},
       "policy/check_seccompProfile_baseline.go"},
      {"seccompProfile_restricted",
       L::kRestricted,
       {{19, seccomp_profile_restricted_1_19, {"seccompProfile_baseline"}},
        {25, seccomp_profile_restricted_1_25, {"seccompProfile_baseline"}}},
       "policy/check_seccompProfile_restricted.go"},
      {"sysctls",
       L::kBaseline,
       {{0, sysctls_allowing(sysctls_allowed(0)), {}},
        {27, sysctls_allowing(sysctls_allowed(27)), {}},
        {29, sysctls_allowing(sysctls_allowed(29)), {}},
        {32, sysctls_allowing(sysctls_allowed(32)), {}},
        {37, sysctls_allowing(sysctls_allowed(37)), {}}},
       "policy/check_sysctls.go"},
      {"windowsHostProcess", L::kBaseline, {{0, windows_host_process_1_0, {}}}, "policy/check_windowsHostProcess.go"},
  };
  return checks;
}

}  // namespace torus::standin

#include "tests/apiserver/object_rules.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>

#include "common/util/base64.h"

namespace torus::standin {

namespace {

bool is_dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return s.front() != '-' && s.back() != '-';
}

bool is_dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!is_dns_label(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

std::string random_uid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng();
  uint64_t b = rng();
  char text[40];
  std::snprintf(text, sizeof(text), "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return text;
}

std::string random_suffix() {
  thread_local std::mt19937 rng{std::random_device{}()};
  // The apiserver's generateName alphabet: no vowels, no confusable characters.
  static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (int i = 0; i < 5; ++i) out += alphabet[rng() % (sizeof(alphabet) - 1)];
  return out;
}

// Services and namespaces need a DNS label (no dots); everything else a DNS subdomain.
std::optional<Cause> invalid_name(const ResourceType& type, const std::string& name) {
  bool label_only = type.group.empty() && (type.plural == "services" || type.plural == "namespaces");
  if (label_only ? is_dns_label(name) : is_dns_subdomain(name)) return std::nullopt;
  std::string message =
      label_only ? "Invalid value: \"" + name +
                       "\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                       "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                       "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                 : "Invalid value: \"" + name +
                       "\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                       "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
  return Cause{"FieldValueInvalid", message, "metadata.name"};
}

bool has_finalizers(const json& object) {
  const json& meta = object["metadata"];
  return meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
}

bool being_deleted(const json& object) { return object["metadata"].contains("deletionTimestamp"); }

void remove_finalizer(json& object, const std::string& finalizer) {
  json& list = object["metadata"]["finalizers"];
  list.erase(std::remove(list.begin(), list.end(), json(finalizer)), list.end());
  if (list.empty()) object["metadata"].erase("finalizers");
}

bool has_finalizer(const json& object, const std::string& finalizer) {
  const json& meta = object["metadata"];
  if (!meta.contains("finalizers")) return false;
  const json& list = meta["finalizers"];
  return std::find(list.begin(), list.end(), json(finalizer)) != list.end();
}

// Everything but metadata and status: what metadata.generation counts changes of.
json spec_part(const json& object) {
  json out = object;
  out.erase("metadata");
  out.erase("status");
  return out;
}

void default_pod(json& pod) {
  json& spec = pod["spec"];
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
  if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
  if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (json& c : spec["containers"]) {
      if (c.is_object() && !c.contains("imagePullPolicy")) {
        std::string image = c.value("image", "");
        bool latest = image.find(':') == std::string::npos || image.ends_with(":latest");
        c["imagePullPolicy"] = latest ? "Always" : "IfNotPresent";
      }
    }
  }
  pod["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
}

std::vector<Cause> validate_pod(const json& pod) {
  std::vector<Cause> causes;
  const json& spec = pod.value("spec", json::object());
  if (!spec.contains("containers") || !spec["containers"].is_array() || spec["containers"].empty()) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.containers"});
    return causes;
  }
  for (size_t i = 0; i < spec["containers"].size(); ++i) {
    const json& c = spec["containers"][i];
    std::string field = "spec.containers[" + std::to_string(i) + "]";
    if (!c.is_object() || c.value("name", "").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".name"});
    }
    if (!c.is_object() || c.value("image", "").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".image"});
    }
  }
  std::string policy = spec.value("restartPolicy", "Always");
  if (policy != "Always" && policy != "OnFailure" && policy != "Never") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: \"" + policy + "\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                      "spec.restartPolicy"});
  }
  return causes;
}

// Pod specs are immutable but for a few fields (containers' images, activeDeadlineSeconds, added tolerations).
std::optional<Cause> forbidden_pod_update(const json& before, const json& after) {
  json a = before.value("spec", json::object());
  json b = after.value("spec", json::object());
  for (json* spec : {&a, &b}) {
    for (const char* list : {"containers", "initContainers"}) {
      if (spec->contains(list)) {
        for (json& c : (*spec)[list]) c.erase("image");
      }
    }
    spec->erase("activeDeadlineSeconds");
    spec->erase("tolerations");
    spec->erase("terminationGracePeriodSeconds");
  }
  if (a == b) return std::nullopt;
  return Cause{"FieldValueForbidden",
               "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
               "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
               "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
               "previously negative)",
               "spec"};
}

std::vector<Cause> validate_claim(const json& claim) {
  std::vector<Cause> causes;
  const json& spec = claim.value("spec", json::object());
  const json modes = spec.value("accessModes", json::array());
  if (!modes.is_array() || modes.empty()) {
    causes.push_back({"FieldValueRequired", "Required value: at least 1 access mode is required", "spec.accessModes"});
  }
  const json requests = spec.value("resources", json::object()).value("requests", json::object());
  if (!requests.is_object() || !requests.contains("storage")) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.resources[storage]"});
  }
  return causes;
}

void bind_claim(json& claim) {
  json& spec = claim["spec"];
  if (!spec.contains("volumeMode")) spec["volumeMode"] = "Filesystem";
  if (!spec.contains("volumeName")) spec["volumeName"] = "pvc-" + claim["metadata"].value("uid", random_uid());
  claim["status"] = {{"phase", "Bound"},
                     {"accessModes", spec["accessModes"]},
                     {"capacity", {{"storage", spec["resources"]["requests"]["storage"]}}}};
}

void default_secret(json& secret) {
  if (!secret.contains("type")) secret["type"] = "Opaque";
  if (secret.contains("stringData") && secret["stringData"].is_object()) {
    for (auto it = secret["stringData"].begin(); it != secret["stringData"].end(); ++it) {
      if (it.value().is_string()) secret["data"][it.key()] = base64_encode(it.value().get<std::string>());
    }
    secret.erase("stringData");
  }
}

std::vector<Cause> validate_secret(const json& secret) {
  std::vector<Cause> causes;
  if (!secret.contains("data") || !secret["data"].is_object()) return causes;
  for (auto it = secret["data"].begin(); it != secret["data"].end(); ++it) {
    const json& v = it.value();
    std::string text = v.is_string() ? v.get<std::string>() : "";
    const std::optional<std::string> decoded = v.is_string() ? base64_decode(text) : std::nullopt;
    if (!decoded || base64_encode(*decoded) != text) {  // canonical base64 only, as the apiserver decodes it
      causes.push_back({"FieldValueInvalid", "Invalid value: illegal base64 data", "data[" + it.key() + "]"});
    }
  }
  return causes;
}

// ---------------------------------------------------------------------------------------------------------------
// Service accounts

std::vector<json> namespace_defaults(const std::string& ns, const std::string& root_ca_pem) {
  json account = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "default"}}}};
  json root_ca = {{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata",
                   {{"name", kRootCaConfigMap},
                    {"annotations",
                     {{"kubernetes.io/description",
                       "Contains a CA bundle that can be used to verify the kube-apiserver when "
                       "using internal endpoints such as the internal service IP or "
                       "kubernetes.default.svc. No other usage is guaranteed across distributions "
                       "of Kubernetes clusters."}}}}},
                  {"data", {{"ca.crt", root_ca_pem}}}};
  for (json* object : {&account, &root_ca}) (*object)["metadata"]["namespace"] = ns;
  return {account, root_ca};
}

std::string default_service_account(json& pod) {
  json& spec = pod["spec"];
  std::string account = spec.value("serviceAccountName", "");
  if (account.empty()) account = spec.value("serviceAccount", "");
  if (account.empty()) account = "default";
  spec["serviceAccountName"] = account;
  spec["serviceAccount"] = account;  // the deprecated alias, still filled in by the apiserver
  return account;
}

void refuse_missing_service_account(const json& pod, const std::string& ns, const std::string& account) {
  const std::string name = pod.value("metadata", json::object()).value("name", "");
  StatusDetails details;
  details.name = name;
  details.kind = "pods";
  throw ApiError(403, "Forbidden",
                 "pods \"" + name + "\" is forbidden: error looking up service account " + ns + "/" + account +
                     ": serviceaccount \"" + account + "\" not found",
                 details);
}

namespace {

bool automount(const json& pod, const json& account) {
  const json& spec = pod["spec"];
  if (spec.contains("automountServiceAccountToken") && spec["automountServiceAccountToken"].is_boolean())
    return spec["automountServiceAccountToken"].get<bool>();
  return account.value("automountServiceAccountToken", true);
}

json api_access_volume(const std::string& name) {
  return {{"name", name},
          {"projected",
           {{"defaultMode", 420},
            {"sources",
             {{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
              {{"configMap", {{"name", kRootCaConfigMap}, {"items", {{{"key", "ca.crt"}, {"path", "ca.crt"}}}}}}},
              {{"downwardAPI",
                {{"items",
                  {{{"path", "namespace"},
                    {"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "metadata.namespace"}}}}}}}}}}}}}};
}

bool mounts_token_path(const json& container) {
  for (const json& m : container.value("volumeMounts", json::array())) {
    if (m.value("mountPath", "") == kServiceAccountMountPath) return true;
  }
  return false;
}

}  // namespace

void mount_service_account_token(json& pod, const json& account) {
  if (!automount(pod, account)) return;
  json& spec = pod["spec"];
  const std::string volume = "kube-api-access-" + random_suffix();
  bool mounted = false;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (json& container : spec[list]) {
      if (mounts_token_path(container)) continue;
      if (!container.contains("volumeMounts")) container["volumeMounts"] = json::array();
      container["volumeMounts"].push_back(
          {{"name", volume}, {"mountPath", kServiceAccountMountPath}, {"readOnly", true}});
      mounted = true;
    }
  }
  if (!mounted) return;
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) spec["volumes"] = json::array();
  spec["volumes"].push_back(api_access_volume(volume));
}

}  // namespace torus::standin

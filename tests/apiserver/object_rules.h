#pragma once
// What the apiserver's registry does per kind on a write, beside the store's own bookkeeping: generated names and
// uids, name validation, pod and secret defaults and validation, the fields a pod update may change, finalizers,
// and service accounts (below).
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/resources.h"

namespace torus::standin {

std::string random_uid();
// generateName's suffix: 5 characters of the apiserver's alphabet.
std::string random_suffix();
// Services and namespaces need a DNS label (no dots); everything else a DNS subdomain.
std::optional<Cause> invalid_name(const ResourceType& type, const std::string& name);

bool has_finalizers(const json& object);
bool has_finalizer(const json& object, const std::string& finalizer);
void remove_finalizer(json& object, const std::string& finalizer);
bool being_deleted(const json& object);
// Everything but metadata and status: what metadata.generation counts changes of.
json spec_part(const json& object);

void default_pod(json& pod);
std::vector<Cause> validate_pod(const json& pod);
// Pod specs are immutable but for a few fields (containers' images, activeDeadlineSeconds, added tolerations).
std::optional<Cause> forbidden_pod_update(const json& before, const json& after);
// Opaque by default; stringData folded into base64 data.
// PersistentVolumeClaims: accessModes and a storage request are required; a valid claim is bound at once (as by a
// default StorageClass that provisions immediately): status.phase Bound, capacity = the request.
std::vector<Cause> validate_claim(const json& claim);
void bind_claim(json& claim);
void default_secret(json& secret);
std::vector<Cause> validate_secret(const json& secret);

inline json& meta(json& object) { return object["metadata"]; }

// What a cluster does for service accounts beside the API itself:
//   - the ServiceAccount and root-CA-publisher controllers of kube-controller-manager: every namespace has the
//     ServiceAccount `default` and the ConfigMap `kube-root-ca.crt` (key ca.crt: the CA that signed the apiserver's
//     serving certificate; empty over plain HTTP);
//   - the ServiceAccount admission plugin on pod creation: spec.serviceAccountName defaults to `default`, a pod
//     naming an account that does not exist is refused (403), and unless automountServiceAccountToken is false (on
//     the pod, else on the account) the pod gets the projected volume `kube-api-access-<5 random>` (a bound token,
//     the root CA, the namespace) mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every
//     container that does not mount something there already.
inline constexpr const char* kServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";
inline constexpr const char* kRootCaConfigMap = "kube-root-ca.crt";

// The objects the controllers make in a new namespace `ns`.
std::vector<json> namespace_defaults(const std::string& ns, const std::string& root_ca_pem);

// Defaults spec.serviceAccountName (and the deprecated spec.serviceAccount) and returns it.
std::string default_service_account(json& pod);
// The 403 the admission plugin answers for a pod whose account `ns`/`account` does not exist.
[[noreturn]] void refuse_missing_service_account(const json& pod, const std::string& ns, const std::string& account);
// Adds the kube-api-access volume and its mounts unless automounting is off (the pod's setting wins over the
// account's, `account` being the stored ServiceAccount).
void mount_service_account_token(json& pod, const json& account);

}  // namespace torus::standin

#pragma once
// What the apiserver's registry does per kind on a write, beside the store's own bookkeeping: generated names and
// uids, name validation, pod and secret defaults and validation, the fields a pod update may change, finalizers.
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

}  // namespace torus::standin

// The admission plugins the store runs beside ServiceAccount (store.cc): Priority (priority.h) and PodSecurity
// (pod_security.h), fed from the stored PriorityClasses, namespaces and pods.
#include "tests/apiserver/pod_security.h"
#include "tests/apiserver/priority.h"
#include "tests/apiserver/store.h"

namespace torus::standin {

namespace {

constexpr const char* kPriorityClasses = "priorityclasses.scheduling.k8s.io";

}  // namespace

std::vector<const json*> Store::objects_locked(const std::string& group_resource, const std::string& ns) const {
  std::vector<const json*> out;
  auto objects = objects_.find(group_resource);
  if (objects == objects_.end()) return out;
  const std::string prefix = object_key(ns, "");  // cluster-scoped objects are keyed "/name"
  for (auto it = objects->second.lower_bound(prefix); it != objects->second.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back(it->second.get());
  }
  return out;
}

void Store::admit_priority_locked(json& pod, const std::string& name) const {
  admit_pod_priority(pod, name, objects_locked(kPriorityClasses, ""));
}

void Store::admit_validating_locked(const ResourceType& type, const std::string& ns, const json& object,
                                    const json* before, Subresource subresource,
                                    std::vector<std::string>& warnings) const {
  if (subresource != Subresource::kMain) return;  // both plugins leave status writes alone
  const std::string gr = type.group_resource();
  if (gr == kPriorityClasses) return admit_priority_class(object, before, objects_locked(gr, ""));
  if (gr == "namespaces") {
    return admit_namespace_pod_security(standin_pod_security(), object, before, objects_locked("pods", name_of(object)),
                                        warnings);
  }
  const bool pods = gr == "pods";
  if (!pods && gr != "deployments.apps" && gr != "replicasets.apps") return;
  ObjectPtr namespace_object = find_locked("namespaces", object_key("", ns));
  if (!namespace_object) return;
  const json labels = (*namespace_object)["metadata"].value("labels", json::object());
  if (pods) return admit_pod_security(standin_pod_security(), labels, object, before, warnings);
  warn_pod_template_security(standin_pod_security(), labels, object, warnings);
}

}  // namespace torus::standin

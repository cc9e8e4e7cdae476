// Deletion: preconditions, graceful pod and namespace deletion, finalizers, and the garbage collector that
// follows owner references (background, foreground, orphan) after every deletion.
#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <tuple>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/object_rules.h"
#include "tests/apiserver/store.h"

namespace torus::standin {
namespace {

// An RFC 3339 timestamp (seconds, UTC) moved by `seconds`.
std::string shifted_rfc3339(const std::string& timestamp, int64_t seconds) {
  std::tm tm{};
  if (!strptime(timestamp.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return timestamp;
  std::time_t t = timegm(&tm) + seconds;
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

DeleteResult Store::remove(const ResourceType& type, const std::string& ns, const std::string& name,
                           const DeleteOptions& options) {
  std::lock_guard lock(mutex_);
  return remove_locked(type, ns, name, options);
}

std::vector<ObjectPtr> Store::remove_collection(const ResourceType& type, const std::string& ns,
                                                const ListOptions& selection, const DeleteOptions& options) {
  ListOptions all = selection;
  all.limit = 0;
  all.continue_token.clear();
  std::lock_guard lock(mutex_);
  std::vector<ObjectPtr> removed;
  auto objects = objects_.find(type.group_resource());
  if (objects == objects_.end()) return removed;
  std::vector<std::pair<std::string, std::string>> targets;
  for (const auto& [key, object] : objects->second) {
    if (type.namespaced() && !ns.empty() && namespace_of(*object) != ns) continue;
    if (!all.labels.matches((*object)["metadata"].value("labels", json())) || !all.fields.matches(*object)) continue;
    targets.emplace_back(namespace_of(*object), name_of(*object));
  }
  for (const auto& [object_ns, object_name] : targets) {
    removed.push_back(remove_locked(type, object_ns, object_name, options).object);
  }
  return removed;
}

DeleteResult Store::remove_locked(const ResourceType& type, const std::string& ns, const std::string& name,
                                  const DeleteOptions& options) {
  ObjectPtr old = require_locked(type, ns, name);
  const std::string gr = type.group_resource();
  const json& m = (*old)["metadata"];
  if (!options.precondition_uid.empty() && options.precondition_uid != m.value("uid", "")) {
    throw ApiError(409, "Conflict",
                   "Precondition failed: UID in precondition: " + options.precondition_uid +
                       ", UID in object meta: " + m.value("uid", ""),
                   StatusDetails{name, type.group, type.plural, {}, 0});
  }
  if (!options.precondition_resource_version.empty() &&
      options.precondition_resource_version != m.value("resourceVersion", "")) {
    throw ApiError(409, "Conflict",
                   "Precondition failed: ResourceVersion in precondition: " + options.precondition_resource_version +
                       ", ResourceVersion in object meta: " + m.value("resourceVersion", ""),
                   StatusDetails{name, type.group, type.plural, {}, 0});
  }
  if (options.dry_run == DryRun::kAll) return {as_version(old, type), DeleteResult::State::kGone};
  std::string key = object_key(type.namespaced() ? ns : "", name);
  json after = *old;
  bool changed = false;
  // Graceful pod deletion (rest.BeforeDelete with the pod strategy's CheckGracefulDelete): a pod running on a node is
  // marked with deletionTimestamp = now + grace, and the kubelet stops it and removes it with grace 0 once its
  // containers ended. A pod already being deleted keeps its mark: a repeated delete only shortens the grace
  // (the deletion timestamp moves by the difference), a longer or no grace leaves it pending, and no propagation
  // finalizers are added then; a pod marked with grace 0 (or shortened to 0) goes at once unless finalizers hold it.
  if (gr == "pods" && pod_deletion_ == PodDeletion::kGraceful) {
    std::optional<int64_t> requested = options.grace_period_seconds;
    if (requested && *requested < 0) requested = 1;  // negative grace periods are read as 1 s
    if (being_deleted(after)) {
      const int64_t current = meta(after).value("deletionGracePeriodSeconds", int64_t{0});
      if (current > 0) {
        if (!requested || *requested >= current) return {as_version(old, type), DeleteResult::State::kPending};
        meta(after)["deletionTimestamp"] =
            shifted_rfc3339(meta(after).value("deletionTimestamp", now_rfc3339()), *requested - current);
        meta(after)["deletionGracePeriodSeconds"] = *requested;
        changed = *requested > 0;
      }
    } else {
      std::string phase = after["status"].value("phase", "");
      int64_t grace = requested.value_or(after["spec"].value("terminationGracePeriodSeconds", 30));
      if (after["spec"].value("nodeName", "").empty() || phase == "Succeeded" || phase == "Failed") grace = 0;
      meta(after)["deletionTimestamp"] = shifted_rfc3339(now_rfc3339(), grace);
      meta(after)["deletionGracePeriodSeconds"] = grace;
      changed = grace > 0;
    }
  }
  if (gr == "namespaces" && !being_deleted(after)) {
    meta(after)["deletionTimestamp"] = now_rfc3339();
    meta(after)["deletionGracePeriodSeconds"] = 0;
    after["status"]["phase"] = "Terminating";
    changed = true;
  }
  if (options.propagation == Propagation::kForeground && !has_finalizer(after, "foregroundDeletion")) {
    meta(after)["finalizers"].push_back("foregroundDeletion");
    changed = true;
  } else if (options.propagation == Propagation::kOrphan && !has_finalizer(after, "orphan")) {
    meta(after)["finalizers"].push_back("orphan");
    changed = true;
  }
  if (has_finalizers(after) || changed) {
    if (!being_deleted(after)) {
      meta(after)["deletionTimestamp"] = now_rfc3339();
      meta(after)["deletionGracePeriodSeconds"] = 0;
    }
    if (after == *old) return {as_version(old, type), DeleteResult::State::kPending};
    ObjectPtr stored = commit_locked(gr, key, std::move(after), EventType::kModified, old);
    collect_garbage_locked();
    ObjectPtr now = find_locked(gr, key);
    if (!now) return {as_version(stored, type), DeleteResult::State::kGone};
    return {as_version(now, type), DeleteResult::State::kPending};
  }
  // The DELETED event carries the object as last marked (a pod: its deletion timestamp and grace 0).
  ObjectPtr last = after == *old ? old : std::make_shared<const json>(std::move(after));
  erase_locked(gr, key, last);
  finish_deletion_locked(gr, key);
  collect_garbage_locked();
  return {as_version(last, type), DeleteResult::State::kGone};
}

void Store::finish_deletion_locked(const std::string& group_resource, const std::string& key) {
  // Deleting a CRD deletes its custom resources (their finalizers are not waited for) and unregisters it.
  if (group_resource != "customresourcedefinitions.apiextensions.k8s.io") return;
  std::string crd_name = key.substr(1);
  ResourcePtr custom;
  for (const ResourcePtr& t : registry_.all()) {
    if (t->origin == Origin::kCustom && t->group_resource() == crd_name) custom = t;
  }
  if (custom) {
    Objects doomed = objects_[crd_name];
    for (const auto& [k, object] : doomed) erase_locked(crd_name, k, object);
  }
  objects_.erase(crd_name);
  registry_.unregister_crd(crd_name);
}

bool Store::owner_exists_locked(const std::string& uid) const { return by_uid_.count(uid) > 0; }

void Store::delete_object_locked(const std::string& group_resource, const std::string& key, Propagation propagation) {
  ObjectPtr object = find_locked(group_resource, key);
  ResourcePtr type = registry_.find_group_resource(group_resource);
  if (!object || !type) return;
  DeleteOptions options;
  options.propagation = propagation;
  remove_locked(*type, namespace_of(*object), name_of(*object), options);
}

// Runs until nothing changes: dependents whose owners are all gone are deleted (background) or, with a surviving
// owner, lose the dead reference; owners deleted in the foreground wait for their dependents; orphaning owners
// strip their references from dependents; terminating namespaces go once empty.
void Store::collect_garbage_locked() {
  bool progress = true;
  while (progress) {
    progress = false;
    std::map<std::string, int> live_dependents;  // owner uid -> dependents still present
    std::vector<std::tuple<std::string, std::string, json>> rewrites;
    std::vector<std::pair<std::string, std::string>> doomed;
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_owner;
    for (const auto& [gr, objects] : objects_) {
      for (const auto& [key, object] : objects) {
        const json& m = (*object)["metadata"];
        if (!m.contains("ownerReferences") || !m["ownerReferences"].is_array()) continue;
        json kept = json::array();
        for (const json& ref : m["ownerReferences"]) {
          std::string uid = ref.value("uid", "");
          if (owner_exists_locked(uid)) {
            kept.push_back(ref);
            ++live_dependents[uid];
            by_owner[uid].emplace_back(gr, key);
          }
        }
        if (kept.size() == m["ownerReferences"].size() || being_deleted(*object)) continue;
        if (kept.empty()) {
          doomed.emplace_back(gr, key);
        } else {
          rewrites.emplace_back(gr, key, kept);
        }
      }
    }
    for (const auto& [gr, key, kept] : rewrites) {
      ObjectPtr old = find_locked(gr, key);
      json after = *old;
      after["metadata"]["ownerReferences"] = kept;
      commit_locked(gr, key, std::move(after), EventType::kModified, old);
      progress = true;
    }
    for (const auto& [gr, key] : doomed) {
      delete_object_locked(gr, key, Propagation::kBackground);
      progress = true;
    }
    if (progress) continue;
    // Owners waiting on the GC's finalizers.
    std::vector<std::pair<std::string, std::string>> finishing;
    for (const auto& [gr, objects] : objects_) {
      for (const auto& [key, object] : objects) {
        if (!being_deleted(*object)) continue;
        std::string uid = (*object)["metadata"].value("uid", "");
        if (has_finalizer(*object, "foregroundDeletion")) {
          for (const auto& [dgr, dkey] : by_owner[uid]) {
            ObjectPtr dependent = find_locked(dgr, dkey);
            if (dependent && !being_deleted(*dependent)) doomed.emplace_back(dgr, dkey);
          }
          if (live_dependents[uid] == 0) finishing.emplace_back(gr, key);
        } else if (has_finalizer(*object, "orphan")) {
          for (const auto& [dgr, dkey] : by_owner[uid]) {
            ObjectPtr old = find_locked(dgr, dkey);
            json after = *old;
            json kept = json::array();
            for (const json& ref : after["metadata"]["ownerReferences"]) {
              if (ref.value("uid", "") != uid) kept.push_back(ref);
            }
            if (kept.empty()) {
              after["metadata"].erase("ownerReferences");
            } else {
              after["metadata"]["ownerReferences"] = kept;
            }
            rewrites.emplace_back(dgr, dkey, after);
          }
          finishing.emplace_back(gr, key);
        } else if (gr == "namespaces") {
          std::string ns = name_of(*object);
          bool empty = true;
          for (const auto& [cgr, cobjects] : objects_) {
            for (const auto& [ckey, cobject] : cobjects) {
              if (namespace_of(*cobject) == ns) {
                empty = false;
                if (!being_deleted(*cobject)) doomed.emplace_back(cgr, ckey);
              }
            }
          }
          if (empty) finishing.emplace_back(gr, key);
        }
      }
    }
    for (const auto& [gr, key, after] : rewrites) {
      ObjectPtr old = find_locked(gr, key);
      commit_locked(gr, key, after, EventType::kModified, old);
      progress = true;
    }
    for (const auto& [gr, key] : doomed) {
      if (find_locked(gr, key)) {
        delete_object_locked(gr, key, Propagation::kBackground);
        progress = true;
      }
    }
    for (const auto& [gr, key] : finishing) {
      ObjectPtr old = find_locked(gr, key);
      if (!old) continue;
      json after = *old;
      if (has_finalizer(after, "foregroundDeletion")) remove_finalizer(after, "foregroundDeletion");
      if (has_finalizer(after, "orphan")) remove_finalizer(after, "orphan");
      if (has_finalizers(after)) {
        if (after != *old) commit_locked(gr, key, std::move(after), EventType::kModified, old);
      } else {
        erase_locked(gr, key, std::make_shared<const json>(std::move(after)));
        finish_deletion_locked(gr, key);
      }
      progress = true;
    }
  }
}

}  // namespace torus::standin

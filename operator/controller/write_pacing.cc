#include "operator/controller/write_pacing.h"

#include <algorithm>

namespace torus::controller {
namespace {

std::string child_id(ChildKind kind, const std::string& name) { return std::string(to_string(kind)) + "/" + name; }

std::string name_of(const json& object) { return object["metadata"].value("name", ""); }

// Every child the cache shows for the job, as "Kind/name".
std::set<std::string> cached_children(const PlanInput& in) {
  std::set<std::string> ids;
  auto add = [&](ChildKind kind, const Objects& objects) {
    for (const json& o : objects) ids.insert(child_id(kind, name_of(o)));
  };
  add(ChildKind::kPod, in.pods);
  add(ChildKind::kService, in.services);
  add(ChildKind::kConfigMap, in.config_maps);
  add(ChildKind::kSecret, in.secrets);
  return ids;
}

// The status without what only follows the pods.
json remembered_part(json status) {
  if (!status.is_object()) return json::object();
  for (const char* k : {"workers", "ranks", "progress"}) status.erase(k);
  return status;
}

// A new job's first status, which may wait for the gang: only the job accepted (phase Pending), with nothing else
// the pass must say (an event, a delete, an update).
bool accepted_only(const json& job, const Plan& plan) {
  return !member(job, "status").contains("phase") && plan.status->value("phase", "") == "Pending" &&
         plan.deletes.empty() && plan.updates.empty() && plan.events.empty() &&
         plan.job_action == Plan::JobAction::kKeep;
}

std::chrono::seconds seconds_until(TimePoint due, TimePoint now) {
  return std::max(std::chrono::ceil<std::chrono::seconds>(due - now), std::chrono::seconds(1));
}

}  // namespace

void CreateExpectations::filter(const std::string& key, const PlanInput& input, Plan& plan) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  const std::set<std::string> cached = cached_children(input);
  auto& pending = it->second;
  for (auto p = pending.begin(); p != pending.end();) {
    const bool seen = cached.count(p->first) > 0;
    p = seen || input.now - p->second >= ttl_ ? pending.erase(p) : std::next(p);
  }
  if (pending.empty()) {
    pending_.erase(it);
    return;
  }
  std::erase_if(plan.creates, [&](const CreateAction& c) {
    return c.kind != ChildKind::kPodGroup && pending.count(child_id(c.kind, name_of(c.object)));
  });
  const bool pods_left = std::any_of(plan.creates.begin(), plan.creates.end(),
                                     [](const CreateAction& c) { return c.kind == ChildKind::kPod; });
  if (!pods_left) {
    std::erase_if(plan.creates, [](const CreateAction& c) { return c.kind == ChildKind::kPodGroup; });
  }
}

void CreateExpectations::created(const std::string& key, const CreateAction& create, TimePoint now) {
  if (create.kind == ChildKind::kPodGroup || create.kind == ChildKind::kClaim) return;  // not cached
  std::lock_guard lock(mu_);
  pending_[key][child_id(create.kind, name_of(create.object))] = now;
}

void CreateExpectations::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  pending_.erase(key);
}


std::optional<std::chrono::seconds> StatusPacing::defer(const std::string& key, const json& job, const Plan& plan,
                                                        TimePoint now) {
  if (!plan.status) return std::nullopt;
  if (accepted_only(job, plan)) {
    std::lock_guard lock(mu_);
    const TimePoint since = accepted_since_.try_emplace(key, now).first->second;
    if (now - since >= accepted_window_) return std::nullopt;
    return seconds_until(since + accepted_window_, now);
  }
  const bool status_only = plan.deletes.empty() && plan.updates.empty() && plan.creates.empty() &&
                           plan.events.empty() && plan.job_action == Plan::JobAction::kKeep;
  if (!status_only || remembered_part(member(job, "status")) != remembered_part(*plan.status)) {
    return std::nullopt;
  }
  std::lock_guard lock(mu_);
  auto it = last_write_.find(key);
  if (it == last_write_.end() || now - it->second >= window_) return std::nullopt;
  return seconds_until(it->second + window_, now);
}

bool StatusPacing::accepting(const std::string& key) {
  std::lock_guard lock(mu_);
  return accepted_since_.count(key) > 0;
}

void StatusPacing::wrote(const std::string& key, TimePoint now) {
  std::lock_guard lock(mu_);
  last_write_[key] = now;
  accepted_since_.erase(key);
}

void StatusPacing::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  last_write_.erase(key);
  accepted_since_.erase(key);
}

}  // namespace torus::controller

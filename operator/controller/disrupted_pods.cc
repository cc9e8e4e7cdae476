#include "operator/controller/disrupted_pods.h"

#include <algorithm>
#include <cstdlib>

#include "operator/controller/labels.h"

namespace torus::controller {
namespace {

int attempt_of(const json& pod) {
  const json& labels = member(member(pod, "metadata"), "labels");
  auto it = labels.find(kLabelAttempt);
  return it != labels.end() && it->is_string() ? std::atoi(it->get<std::string>().c_str()) : -1;
}

}  // namespace

void DisruptedPods::gone(const std::string& job_key, const json& pod) {
  if (!disruption_of(pod)) return;
  auto kept = std::make_shared<const json>(pod);
  std::lock_guard lock(mu_);
  auto& pods = by_job_[job_key];
  pods.push_back(std::move(kept));
  if (pods.size() > kMaxPerJob) pods.erase(pods.begin(), pods.begin() + static_cast<long>(pods.size() - kMaxPerJob));
}

Objects DisruptedPods::of(const std::string& job_key, const std::string& uid, int attempt) {
  std::lock_guard lock(mu_);
  auto it = by_job_.find(job_key);
  if (it == by_job_.end()) return {};
  auto& pods = it->second;
  pods.erase(std::remove_if(pods.begin(), pods.end(),
                            [&](const auto& pod) { return !controlled_by(*pod, uid) || attempt_of(*pod) < attempt; }),
             pods.end());
  Objects out(pods.begin(), pods.end());
  if (pods.empty()) by_job_.erase(it);
  return out;
}

void DisruptedPods::forget(const std::string& job_key) {
  std::lock_guard lock(mu_);
  by_job_.erase(job_key);
}

size_t DisruptedPods::size(const std::string& job_key) {
  std::lock_guard lock(mu_);
  auto it = by_job_.find(job_key);
  return it == by_job_.end() ? 0 : it->second.size();
}

}  // namespace torus::controller

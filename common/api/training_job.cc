#include "common/api/training_job.h"

#include <algorithm>
#include <ctime>

namespace torus::api {
namespace {

std::string now_rfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

const Condition* find_condition(const TrainingJobStatus& status, std::string_view type) {
  auto it = std::find_if(status.conditions.begin(), status.conditions.end(),
                         [&](const Condition& c) { return c.type == type; });
  return it == status.conditions.end() ? nullptr : &*it;
}

bool set_condition(TrainingJobStatus& status, Condition condition) {
  auto it = std::find_if(status.conditions.begin(), status.conditions.end(),
                         [&](const Condition& c) { return c.type == condition.type; });
  if (it == status.conditions.end()) {
    if (condition.last_transition_time.empty()) condition.last_transition_time = now_rfc3339();
    status.conditions.push_back(std::move(condition));
    return true;
  }
  // Kubernetes convention: the transition time marks the last change of `status`, not of reason or message.
  if (it->status == condition.status) {
    condition.last_transition_time = it->last_transition_time;
  } else if (condition.last_transition_time.empty()) {
    condition.last_transition_time = now_rfc3339();
  }
  if (*it == condition) return false;
  *it = std::move(condition);
  return true;
}

}  // namespace torus::api

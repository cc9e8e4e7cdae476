#pragma once
// What the controller remembers of a pod that is gone: its last state, when it carried a DisruptionTarget condition.
//
// Kubernetes adds that condition before it evicts (the eviction API, `kubectl drain`), preempts, taint-evicts or
// garbage-collects a pod, and the pod is then deleted. The informer's cache forgets a pod with its DELETED event,
// and the pass that follows (events of a gang are coalesced for 200 ms) may never see the pod in between, so the
// condition would be lost and the disruption counted as a worker killed. The DELETED event carries the pod's final
// state: kept here by job, it reaches the planner as PlanInput::gone_pods (planner.h), which judges the vanished
// worker as last seen. Memory only: an operator restarted between the deletion and the pass counts it as a failure.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/controller/planner.h"

namespace torus::controller {

class DisruptedPods {
 public:
  // At most this many pods per job, the newest kept (a gang loses at most its workers per attempt).
  static constexpr size_t kMaxPerJob = 256;

  // A pod's DELETED event: remembered under `job_key` when it carries a DisruptionTarget condition (disruption_of).
  void gone(const std::string& job_key, const json& pod);
  // The pods remembered for `job_key` that the job of `uid` owns (controller owner reference) and that belong to
  // `attempt` or a later one; those of earlier attempts, or of another job of the same name, are forgotten.
  Objects of(const std::string& job_key, const std::string& uid, int attempt);
  void forget(const std::string& job_key);
  size_t size(const std::string& job_key);

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<std::shared_ptr<const json>>> by_job_;
};

}  // namespace torus::controller

#pragma once
// The part of kube-controller-manager that turns a Deployment into pods, for the stand-in: the deployment controller
// (one ReplicaSet per pod template, named <deployment>-<pod-template-hash>, rolling from the old ReplicaSets to the
// new one within maxSurge / maxUnavailable, or Recreate) and the replicaset controller (pods <replicaset>-<random>
// created and deleted to match spec.replicas, a deleted or failed pod replaced), both writing their status
// (replicas, readyReplicas, availableReplicas, updatedReplicas, observedGeneration, the Available condition).
// Without it a chart's Deployment makes no pod: `helm install` of the operator would install an operator that
// never runs.
//
// Level-triggered: any change of a Deployment, ReplicaSet or pod makes one pass over all of them. Pods run through
// whatever kubelet the stand-in has (kubelet_sim.h), which marks them Ready.
#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/apiserver/store.h"

namespace torus::standin {

// The pod-template-hash of a template, as the deployment controller derives it (FNV-1a 32 of the template, its
// decimal digits mapped to the apimachinery rand.SafeEncodeString alphabet).
std::string pod_template_hash(const nlohmann::json& pod_template);

class WorkloadControllers {
 public:
  explicit WorkloadControllers(Store& store);
  ~WorkloadControllers();  // stops the controller thread; never throws
  WorkloadControllers(const WorkloadControllers&) = delete;
  WorkloadControllers& operator=(const WorkloadControllers&) = delete;

 private:
  enum class Watching { kRewatch, kClosed };
  void run();
  Watching watch_and_reconcile(const std::vector<std::unique_ptr<WatchStream>>& streams);
  // One pass; false when a write was refused (a conflict: the next pass retries).
  bool reconcile_all();
  void reconcile_deployment(const json& deployment, const std::vector<ObjectPtr>& replica_sets);
  void reconcile_replica_set(const json& replica_set, const std::vector<ObjectPtr>& pods);
  ObjectPtr ensure_replica_set(const json& deployment, const std::string& hash,
                               const std::vector<ObjectPtr>& owned);
  void scale(const json& replica_set, int64_t replicas);
  void write_status(const ResourceType& type, const json& object, const json& status);

  Store& store_;
  const ResourceType deployments_;
  const ResourceType replica_sets_;
  const ResourceType pods_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<WatchStream*> streams_;  // guarded by mutex_: cancelled by the destructor
  std::thread thread_;
};

}  // namespace torus::standin

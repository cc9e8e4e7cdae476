#pragma once
// kube-controller-manager's taint-eviction-controller (pkg/controller/tainteviction) for the stand-in: a pod bound to
// a node with a NoExecute taint it does not tolerate is deleted at once; one whose tolerations of the node's NoExecute
// taints carry tolerationSeconds is deleted once the shortest of them has passed since the controller saw it there;
// one that tolerates them without seconds stays (scheduling.h noexecute_grace). A taint removed in time, or the pod
// gone, cancels its eviction. Deleting is what the controller does: the DisruptionTarget condition (True, reason
// DeletionByTaintManager, message "Taint manager: deleting due to NoExecute taint") on the pod's status, then a
// DELETE (the pod's own grace period), so the kubelet stops its containers as for any deletion.
//
// It watches the nodes (their taints, `kubectl taint ... :NoExecute`); the kubelet simulation tells it of each
// bound pod (pod_changed), as the controller's pod informer would.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/apiserver/store.h"

namespace torus::standin {

inline constexpr const char* kTaintEvictionReason = "DeletionByTaintManager";
inline constexpr const char* kTaintEvictionMessage = "Taint manager: deleting due to NoExecute taint";

class TaintEviction {
 public:
  // Starts watching the nodes of `store`.
  explicit TaintEviction(Store& store);
  ~TaintEviction();  // stops both threads; never throws
  TaintEviction(const TaintEviction&) = delete;
  TaintEviction& operator=(const TaintEviction&) = delete;

  // `pod` was written (bound, say): judged against its node's taints as they are now.
  void pod_changed(const nlohmann::json& pod);

 private:
  using Clock = std::chrono::steady_clock;
  struct Due {
    Clock::time_point when;
    std::string uid;
  };
  void watch_nodes();
  void evict_when_due();
  void judge_pods_on(const nlohmann::json& node);
  // Schedules, keeps or cancels the eviction of `pod` on a node with `taints`.
  void judge(const nlohmann::json& pod, const nlohmann::json& taints);
  void evict(const std::string& key, const std::string& uid);

  Store& store_;
  const ResourceType& pods_;
  const ResourceType& nodes_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Due> due_;  // "ns/name" -> when the pod goes; guarded by mutex_
  std::atomic<bool> stopping_{false};
  WatchStream* stream_ = nullptr;  // guarded by mutex_: cancelled by the destructor
  std::thread watcher_, evictor_;
};

}  // namespace torus::standin

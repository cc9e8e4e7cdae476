#pragma once
// Fewer API writes per job, computed from the informer caches (level-triggered), as client-go's controllers do:
// - CreateExpectations (kube-controller-manager's ControllerExpectations): the children a pass created are not
//   created again by the passes that run before the watch brings them into the cache; an expectation ends when
//   the cache shows the child, or after `ttl` (a child deleted before it was ever seen).
// - StatusPacing: a status change that only follows the pods (worker counts, rank placement, progress) is written
//   at most once per `window` per job, so pod transitions that arrive together make one write. Any change the
//   planner remembers (phase, attempt, restarts, conditions, times) and any pass with other actions is written at
//   once: the status is the planner's memory. One exception: a new job's accepted status (phase Pending, the Created
//   condition, startTime) waits up to `accepted_window` from the job's first pass, even past that pass's creates,
//   so that a gang that starts in that time makes one write, Running. Nothing is lost while it waits: the children's
//   deterministic names and the create expectations keep a replanning pass (another worker, a restarted operator)
//   from creating anything twice, and the planner derives the same start time from the children.
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/controller/planner.h"

namespace torus::controller {

class CreateExpectations {
 public:
  explicit CreateExpectations(std::chrono::seconds ttl = std::chrono::seconds(30)) : ttl_(ttl) {}
  // Drops from `plan.creates` the children created for `key` that the cache (`input`) does not show yet, and ends
  // the expectations the cache now satisfies. A PodGroup create goes with its pods: dropped when no pod is left.
  void filter(const std::string& key, const PlanInput& input, Plan& plan);
  // Records a child created for `key` by this pass.
  void created(const std::string& key, const CreateAction& create, TimePoint now);
  void forget(const std::string& key);

 private:
  std::chrono::seconds ttl_;
  std::mutex mu_;
  std::map<std::string, std::map<std::string, TimePoint>> pending_;  // key -> "Kind/name" -> when created
};

class StatusPacing {
 public:
  explicit StatusPacing(std::chrono::seconds window = std::chrono::seconds(1),
                        std::chrono::seconds accepted_window = std::chrono::seconds(3))
      : window_(window), accepted_window_(accepted_window) {}
  // When `plan`'s status may wait: how long until this job's next write is due. nullopt: write it now.
  std::optional<std::chrono::seconds> defer(const std::string& key, const json& job, const Plan& plan, TimePoint now);
  // Whether a pass of `key` already deferred its accepted status (the job has been acted on without a status).
  bool accepting(const std::string& key);
  void wrote(const std::string& key, TimePoint now);
  void forget(const std::string& key);

 private:
  std::chrono::seconds window_;
  std::chrono::seconds accepted_window_;
  std::mutex mu_;
  std::map<std::string, TimePoint> last_write_;
  std::map<std::string, TimePoint> accepted_since_;  // key -> the first pass that deferred its accepted status
};

}  // namespace torus::controller

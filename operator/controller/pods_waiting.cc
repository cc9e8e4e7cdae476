#include "operator/controller/pods_waiting.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace torus::controller {

bool needs_a_fix(const std::string& waiting_reason) {
  // The kubelet's reasons (pkg/kubelet/images/types.go, kuberuntime's container start) for a container it will not
  // start until something changes: the image, the pod's settings, or the node.
  static constexpr std::array<std::string_view, 7> kReasons = {
      "ErrImagePull",      "ImagePullBackOff",           "ErrImageNeverPull",   "InvalidImageName",
      "ImageInspectError", "CreateContainerConfigError", "CreateContainerError"};
  return std::find(kReasons.begin(), kReasons.end(), waiting_reason) != kReasons.end();
}

std::optional<WhyWaiting> why_waiting(const GangObservation& gang) {
  const WorkerState* first = nullptr;
  for (const WorkerState& w : gang.workers) {
    if (w.phase != PodPhase::kPending || !w.waiting || !needs_a_fix(w.waiting->reason)) continue;
    if (first == nullptr || w.name < first->name) first = &w;
  }
  if (first == nullptr) return std::nullopt;
  return WhyWaiting{first->waiting->reason, "pod " + first->name + ": " + first->waiting->message};
}

}  // namespace torus::controller

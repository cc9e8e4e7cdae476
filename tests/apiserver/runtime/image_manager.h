#pragma once
// The kubelet's image manager (pkg/kubelet/images/image_manager.go, EnsureImageExists): before a container starts,
// its image must be on the node, as the container's imagePullPolicy decides:
//   Never          present, else ErrImageNeverPull "Container image "X" is not present with pull policy of Never"
//   IfNotPresent   present, else pulled
//   Always         pulled every time (the registry is asked; a node's copy alone does not do)
// A pull the registry cannot serve is ErrImagePull with containerd's message; the next tries within the back-off
// (10 s doubling to 300 s per pod and image, the kubelet's) are ImagePullBackOff "Back-off pulling image "X":
// ErrImagePull: ...". A malformed reference is InvalidImageName.
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <variant>

#include "tests/apiserver/runtime/image_store.h"

namespace torus::standin {

enum class PullPolicy { kAlways, kIfNotPresent, kNever };

// The container's imagePullPolicy, else the apiserver's default for its image: Always for :latest or no tag,
// IfNotPresent otherwise.
PullPolicy pull_policy(const std::string& image, const std::string& policy);

struct ImageReady {
  Image image;
  std::filesystem::path rootfs;
};
// The container waits: a kubelet's waiting reason and message for it.
struct ImageWaiting {
  std::string reason;  // ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName
  std::string message;
};

// The kubelet's image pull back-off (pkg/kubelet/kubelet.go: backOffPeriod 10 s, MaxImageBackOff 300 s).
struct PullBackoff {
  std::chrono::milliseconds initial{10000}, max{300000};
};

class ImageManager {
 public:
  ImageManager(ImageStore& store, PullBackoff backoff);

  // The image of a container of pod `pod_uid` on `node`, pulled when the policy says so, unpacked on the node.
  std::variant<ImageReady, ImageWaiting> ensure(const std::string& node, const std::string& pod_uid,
                                                const std::string& image, PullPolicy policy);
  // When the earliest back-off of a failed pull ends (for the kubelet's next look), or max() when none runs.
  std::chrono::steady_clock::time_point next_retry() const;

 private:
  struct Failure {
    std::chrono::steady_clock::time_point until;
    std::chrono::milliseconds period;
    std::string message;
  };
  ImageStore& store_;
  PullBackoff backoff_;
  mutable std::mutex mu_;
  std::map<std::string, Failure> failures_;  // "<pod uid>_<image>", as the kubelet keys its back-off
};

}  // namespace torus::standin

#include "tests/apiserver/runtime/image_manager.h"

#include <algorithm>

namespace torus::standin {
namespace {

using Clock = std::chrono::steady_clock;

bool has_tag_or_digest(const std::string& image) {
  if (image.find('@') != std::string::npos) return true;
  const auto colon = image.rfind(':');
  return colon != std::string::npos && image.find('/', colon) == std::string::npos;
}

}  // namespace

PullPolicy pull_policy(const std::string& image, const std::string& policy) {
  if (policy == "Always") return PullPolicy::kAlways;
  if (policy == "Never") return PullPolicy::kNever;
  if (policy == "IfNotPresent") return PullPolicy::kIfNotPresent;
  // pkg/apis/core/v1/defaults.go SetDefaults_Container: Always when the tag is latest or absent.
  const bool latest = !has_tag_or_digest(image) || image.ends_with(":latest");
  return latest ? PullPolicy::kAlways : PullPolicy::kIfNotPresent;
}

ImageManager::ImageManager(ImageStore& store, PullBackoff backoff) : store_(store), backoff_(backoff) {}

std::variant<ImageReady, ImageWaiting> ImageManager::ensure(const std::string& node, const std::string& pod_uid,
                                                            const std::string& image, PullPolicy policy) {
  const auto reference = normalize_reference(image);
  if (!reference) {
    return ImageWaiting{"InvalidImageName", "Failed to apply default image tag \"" + image +
                                                "\": couldn't parse image name \"" + image +
                                                "\": invalid reference format"};
  }
  const auto present = store_.on_node(node, *reference);
  if (policy == PullPolicy::kNever || (policy == PullPolicy::kIfNotPresent && present)) {
    if (!present) {
      return ImageWaiting{"ErrImageNeverPull",
                          "Container image \"" + image + "\" is not present with pull policy of Never"};
    }
    return ImageReady{*present, store_.rootfs(node, *present)};
  }
  const std::string key = pod_uid + "_" + image;
  {
    std::lock_guard lock(mu_);
    auto failed = failures_.find(key);
    if (failed != failures_.end() && Clock::now() < failed->second.until) {
      return ImageWaiting{"ImagePullBackOff",
                          "Back-off pulling image \"" + image + "\": ErrImagePull: " + failed->second.message};
    }
  }
  const auto pulled = store_.in_registry(*reference);
  if (!pulled) {
    // containerd's answer for a reference no registry resolves (pull access denied or not found).
    const std::string message = "rpc error: code = NotFound desc = failed to pull and unpack image \"" + *reference +
                                "\": failed to resolve reference \"" + *reference + "\": " + *reference + ": not found";
    std::lock_guard lock(mu_);
    auto it = failures_.find(key);
    const auto period = it == failures_.end() ? backoff_.initial : std::min(it->second.period * 2, backoff_.max);
    failures_[key] = Failure{Clock::now() + period, period, message};
    return ImageWaiting{"ErrImagePull", message};
  }
  {
    std::lock_guard lock(mu_);
    failures_.erase(key);
  }
  store_.add_to_node(node, *pulled);
  return ImageReady{*pulled, store_.rootfs(node, *pulled)};
}

Clock::time_point ImageManager::next_retry() const {
  std::lock_guard lock(mu_);
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [key, failure] : failures_) next = std::min(next, failure.until);
  return next;
}

}  // namespace torus::standin

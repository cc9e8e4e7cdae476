#pragma once
// A container's identity and the volumes it can write, as the kubelet and the container runtime settle them from the
// pod's and the container's securityContext and the image (the kubelet's kuberuntime_container.go and
// security_context.go, containerd's WithUser/WithAdditionalGIDs, the volume plugins' SetVolumeOwnership):
//   user      runAsUser (container, else pod), else the image's User: a number, or a name looked up in the image's
//             /etc/passwd; group: runAsGroup, else the image User's group part, else the passwd entry's, else 0
//   groups    the pod's supplementalGroups and fsGroup, and (SupplementalGroupsPolicy Merge, the default) the
//             groups the image's /etc/group lists the user in
//   runAsNonRoot  a container that would run as uid 0, or whose image user is a name that cannot be verified, is not
//             started: CreateContainerConfigError with the kubelet's message
//   fsGroup   the volumes that support ownership (emptyDir, configMap, secret, projected, persistentVolumeClaim; not
//             hostPath or nfs) are made group-owned by it, group-writable (read-only ones group-readable) and setgid
//             on folders; fsGroupChangePolicy OnRootMismatch skips a volume whose root already matches
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tests/apiserver/pod_root.h"
#include "tests/apiserver/runtime/image_store.h"

namespace torus::standin {

// A container the kubelet will not start as configured (waiting reason CreateContainerConfigError).
struct ConfigError {
  std::string message;
};

// The container's user and groups, or why it cannot start. `rootfs`: the image's unpacked files (/etc/passwd and
// /etc/group are read from there).
std::variant<ContainerUser, ConfigError> container_user(const nlohmann::json& pod, const nlohmann::json& container,
                                                        const ImageConfig& image, const std::filesystem::path& rootfs);

// The home folder of `uid` in the image's /etc/passwd, "/" when it has none (containerd's HOME default).
std::string home_of(uint32_t uid, const std::filesystem::path& rootfs);

// The capabilities the container keeps: containerd's defaults, with securityContext.capabilities' drop (ALL: every
// one) and add applied.
std::vector<std::string> container_capabilities(const nlohmann::json& container);

enum class VolumeAccess { kReadWrite, kReadOnly };
// The pod's fsGroup and fsGroupChangePolicy applied to the volume folder `dir` (nothing when the pod sets none).
void apply_fs_group(const nlohmann::json& pod, const std::filesystem::path& dir, VolumeAccess access);

}  // namespace torus::standin

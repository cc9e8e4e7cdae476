#pragma once
// How the process kubelet turns one container of a pod into a process (pod_sandbox.h prepares the pod around it):
// the root its helper enters (pod_root.h), its command line and its environment.
//
// From an image (runtime/image_store.h), as Kubernetes documents and containerd does:
//   command   `command` + `args` when the container sets a command; else the image's Entrypoint + (`args`, else the
//             image's Cmd); $(VAR) references in the pod's command and args expanded, the image's left as they are
//   env       the image's Env, then the kubelet's (KUBERNETES_SERVICE_*), then the container's env; HOME from the
//             image's /etc/passwd for the user when none is set
//   workdir   `workingDir`, else the image's WorkingDir, else /
//   user      runtime/container_security.h; readOnlyRootFilesystem, allowPrivilegeEscalation and capabilities from
//             the container's securityContext
// Without an image (a test's host programs): the host-folders root, the command mapped through
// SandboxOptions::commands or the image's repository through SandboxOptions::images, the stand-in's environment
// under the container's, as root.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "common/process/supervisor.h"
#include "tests/apiserver/pod_root.h"
#include "tests/apiserver/pod_sandbox.h"

namespace torus::standin {

// Where a volume's data lives, as the container mounts it.
struct VolumeSource {
  RootMount::Kind kind = RootMount::Kind::kBind;
  std::filesystem::path host;  // kBind
  uint64_t size_bytes = 0;     // kTmpfs
  RootMount::Access access = RootMount::Access::kReadWrite;
};
using Volumes = std::map<std::string, VolumeSource>;

// A downward API field of the pod (metadata.name, status.podIP...); InvalidArgument naming `where` for others.
std::string field_value(const nlohmann::json& pod, const std::string& path, const std::string& where);

struct ContainerProcess {
  RootPlan plan;
  std::vector<std::string> argv;  // the container's own command line (what the helper execs)
  std::map<std::string, std::string> env;
  process::ProcessSpec::Environment environment = process::ProcessSpec::Environment::kInherit;
};

// Container `c` of `pod`, whose folder is `dir`, or why it cannot start (CreateContainerConfigError,
// CreateContainerError). `image`: the container's image on the node, or null (a host program).
std::variant<ContainerProcess, Waiting> container_process(const nlohmann::json& pod, const nlohmann::json& c,
                                                          const Volumes& volumes, const SandboxOptions& options,
                                                          const std::filesystem::path& dir, const ImageReady* image);

// <pod dir>/<container>.termination-log: the file mounted at the container's terminationMessagePath.
std::filesystem::path termination_log(const std::filesystem::path& dir, const nlohmann::json& c);

}  // namespace torus::standin

#pragma once
// What the process kubelet (process_kubelet.h) needs to run a bound pod's containers as local processes: a folder
// per pod holding its ConfigMap, Secret and emptyDir volumes, and per container the command line and environment a
// kubelet would give it, with:
//   - downward API values filled in (fieldRef metadata.name, metadata.namespace, metadata.uid, spec.nodeName,
//     spec.serviceAccountName, status.podIP, status.hostIP);
//   - mount paths mapped: an env value or argument that names a volume's mountPath (or a file under it) names the
//     volume's folder instead;
//   - cluster DNS simulated: an env value that is a pod's headless-service name
//     (<hostname>.<subdomain>.<namespace>.svc[.cluster.local]) becomes that pod's IP (a 127.x.y.z address).
#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tests/apiserver/store.h"

namespace torus::standin {

struct ContainerLaunch {
  std::string name;
  std::vector<std::string> argv;  // command + args; argv[0] mapped through SandboxOptions::commands
  std::map<std::string, std::string> env;
};

struct PodLaunch {
  std::filesystem::path dir;  // <root>/<namespace>/<name>-<uid>: volumes/, <container>.log, <container>.pid
  std::vector<ContainerLaunch> containers;
};

// Not yet: what the pod waits for (a ConfigMap, a Secret, a DNS name without a pod IP), as a kubelet keeps a pod in
// ContainerCreating.
struct Waiting {
  std::string reason;
};

struct SandboxOptions {
  std::filesystem::path root;
  std::map<std::string, std::string> commands;  // container command[0] -> the program to run (e.g. a built binary)
  std::map<std::string, std::string> env;       // added to every container (e.g. OMP_WAIT_POLICY)
};

// The pod's folder under `root` (also where the runner writes logs and pid files).
std::filesystem::path pod_dir(const std::filesystem::path& root, const json& pod);

// Writes the pod's volumes and resolves its containers, or says what it waits for. Throws InvalidArgument naming
// the field for what no kubelet could run (no command, an unsupported volume or env source).
std::variant<PodLaunch, Waiting> prepare_pod(const Store& store, const json& pod, const SandboxOptions& options);

}  // namespace torus::standin

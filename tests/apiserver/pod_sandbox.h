#pragma once
// What the process kubelet (process_kubelet.h) needs to run a bound pod's containers as local processes, isolated
// as a container runtime would: a folder per pod holding its ConfigMap, Secret and emptyDir volumes, and per
// container its own filesystem (pod_root.h: a private root with the system folders read-only and only the volumes
// the container mounts), its command line and the environment a kubelet would give it, with:
//   - downward API values filled in (fieldRef metadata.name, metadata.namespace, metadata.uid, spec.nodeName,
//     spec.serviceAccountName, status.podIP, status.hostIP);
//   - the pod's own host name (a UTS namespace) and name service: /etc/hosts, /etc/resolv.conf, /etc/nsswitch.conf
//     and /etc/hostname from <pod dir>/dns, where the cluster DNS's records (cluster_dns.h: names only through a
//     headless Service that selects the pod) are kept current; env values stay as written (a DNS name is resolved
//     by the container, and fails to resolve as in a cluster when no Service publishes it).
// Volumes and where their data lives on the host (under SandboxOptions::root):
//   configMap, secret           <pod dir>/volumes/<name>, written from the object, mounted read-only
//   emptyDir                    <pod dir>/volumes/<name>; medium Memory: a tmpfs of sizeLimit (one per container)
//   hostPath                    _nodes/<node>/<path>: one folder per node, shared by that node's pods
//   persistentVolumeClaim       _claims/<namespace>/<claim>-<uid>: outlives pods (the claim must exist, else the pod
//                               waits); a claim made again under the same name gets a new folder
//   nfs                         _nfs/<server>/<path>: shared by every pod
//   projected                   <pod dir>/volumes/<name>, read-only: serviceAccountToken (minted for the pod's
//                               account), configMap and secret items, downwardAPI fieldRef items
// A path the container did not mount is in its private root: visible to it alone, and lost when it ends.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/process/supervisor.h"
#include "tests/apiserver/cluster_dns.h"
#include "tests/apiserver/runtime/image_manager.h"
#include "tests/apiserver/store.h"

namespace torus::standin {

struct ContainerLaunch {
  std::string name;
  // Where the kubelet reads the container's last words from (the file mounted at its terminationMessagePath:
  // <pod dir>/<container>.termination-log), and whether a failure with none falls back to the log's tail
  // (terminationMessagePolicy FallbackToLogsOnError).
  std::filesystem::path termination_log;
  enum class MessagePolicy { kFile, kFallbackToLogsOnError } message_policy = MessagePolicy::kFile;
  // exec_helper, the root plan's file, "--", then command + args (argv[0] mapped through SandboxOptions::commands)
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  process::ProcessSpec::Environment environment = process::ProcessSpec::Environment::kInherit;
};

struct PodLaunch {
  // <root>/<namespace>/<name>-<uid>: volumes/, <container>.log, <container>.pid, <container>.root.json (the plan)
  std::filesystem::path dir;
  std::vector<ContainerLaunch> containers;
};

// Not yet: what the pod waits for, as a kubelet keeps its containers waiting: ContainerCreating for a ConfigMap,
// Secret or claim that is not there yet (no container named), CreateContainerConfigError for a container that cannot
// start as configured (runAsNonRoot with a root image), or an image's reason (runtime/image_manager.h).
struct Waiting {
  std::string message;
  std::string reason = "ContainerCreating";
  std::string container;  // empty: every container of the pod
};

// The images of a pod's containers, resolved on its node (container name -> image). A container with one runs from
// it: its root is the image's, its command, environment, working folder and user the image's under the pod's own.
// A container without one runs in the host-folders root (pod_root.h base_mounts), as root, with its command mapped
// through SandboxOptions::commands.
using PodImages = std::map<std::string, ImageReady>;

struct SandboxOptions {
  std::filesystem::path root;
  std::map<std::string, std::string> commands;  // container command[0] -> the program to run (e.g. a built binary)
  std::map<std::string, std::string> env;       // added to every container (e.g. OMP_WAIT_POLICY)
  // Image repository (the image without its tag or digest) -> the program its entrypoint runs, for containers
  // without `command` (their `args` follow it), e.g. ghcr.io/torus-dev/torus-operator -> build/bin/torus.
  std::map<std::string, std::string> images;
  // The program that enters a container's root and execs its command (pod_exec_main.cc); the build's by default.
  std::string exec_helper = TORUS_STANDIN_POD_EXEC;
  // Mints a token of service account (namespace, name) for a projected serviceAccountToken, as the kubelet asks the
  // TokenRequest API (ApiServer::mint_service_account_token); unset: no token file is written.
  std::function<std::string(const std::string&, const std::string&)> mint_token;
  // The `kubernetes` Service's address the kubelet gives every container (KUBERNETES_SERVICE_HOST/PORT); unset
  // when empty.
  std::string service_host;
  int service_port = 0;
  // The image pull back-off (the kubelet's: 10 s doubling to 300 s); tests shorten it.
  PullBackoff pull_backoff;
};

// The pod's folder under `root` (also where the runner writes logs and pid files).
std::filesystem::path pod_dir(const std::filesystem::path& root, const json& pod);

// The message a kubelet puts in state.terminated.message of a container that ended with `exit_code`: the
// termination log's first 4096 bytes, else (FallbackToLogsOnError, a failure) the last 80 lines or 2048 bytes of
// its output, whichever is shorter.
std::string termination_message(const ContainerLaunch& c, const std::filesystem::path& log, int exit_code);

// Where the pod's name-service files are: <pod dir>/dns.
std::filesystem::path dns_folder(const std::filesystem::path& pod_dir);
// Writes the pod's name-service files (its /etc/hosts with `records`, resolv.conf, nsswitch.conf, hostname).
void write_pod_dns(const std::vector<DnsRecord>& records, const json& pod, const std::filesystem::path& pod_dir);
// Replaces the pod's /etc/hosts with `hosts` (hosts_file of the records now): the process kubelet does while the pod
// runs, as the cluster's DNS answers what is true now.
void write_pod_hosts(const std::filesystem::path& pod_dir, const std::string& hosts);

// Writes the pod's volumes and resolves its containers, or says what it waits for. Throws InvalidArgument naming
// the field for what no kubelet could run (no command, an unsupported volume or env source).
std::variant<PodLaunch, Waiting> prepare_pod(const Store& store, const json& pod, const SandboxOptions& options,
                                             const PodImages& images = {});

}  // namespace torus::standin

#pragma once
// The process kubelet: an optional mode of the simulated kubelet (kubelet_sim.h, KubeletOptions::processes;
// `kube-standin --run-pods DIR`) that runs each pod it started as real local processes, one per container, with
// the environment, volumes and DNS of pod_sandbox.h, from its image when the container names one the node has or can
// pull (runtime/image_manager.h), else as a host program (SandboxOptions::commands/images). Every pod has its own loopback address (its 127.x.y.z pod IP),
// so pods bind the same ports without clashing and talk over real TCP. A container's exit is written back as a
// kubelet would (KubeletSim::terminate: restartPolicy Never -> Succeeded/Failed with terminated.exitCode, 128 + N
// for a signal). Deleting a pod sends its processes SIGTERM, then SIGKILL after the grace period; the pod goes once
// they ended. Output goes to <pod dir>/<container>.log and the pid to <pod dir>/<container>.pid.
//
// A container from an image gets the image's environment under the pod's own; a host program inherits the
// stand-in's (PATH, HOME...).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/apiserver/pod_sandbox.h"
#include "tests/apiserver/store.h"

namespace torus::standin {

class ProcessKubelet {
 public:
  // Container `container` of pod ns/name ended with `exit_code` (`reason`: Completed, Error, ContainerCannotRun);
  // `last` when it was the pod's last running container.
  struct Exit {
    std::string ns, pod, container;
    int exit_code = 0;
    std::string reason;
    enum class Pod { kContainersLeft, kAllEnded } pod_state = Pod::kAllEnded;
    std::string message;  // state.terminated.message (pod_sandbox.h termination_message)
  };
  using ExitHandler = std::function<void(const Exit&)>;
  // Before its containers run, a pod's sandbox waits (a container's reason and message: ErrImagePull,
  // ImagePullBackOff, CreateContainerConfigError; ContainerCreating for a volume); then its containers start
  // (`started`, with each container's image id: the manifest digest, empty for a host program).
  struct Progress {
    std::string ns, pod;
    std::optional<Waiting> waiting;                // set: still waiting
    std::map<std::string, std::string> image_ids;  // started: container -> image id
  };
  using ProgressHandler = std::function<void(const Progress&)>;

  ProcessKubelet(const Store& store, SandboxOptions options, ExitHandler on_exit, ProgressHandler on_progress);
  ~ProcessKubelet();  // kills and reaps every process; never throws
  ProcessKubelet(const ProcessKubelet&) = delete;
  ProcessKubelet& operator=(const ProcessKubelet&) = delete;

  // A pod whose sandbox was just made (it has its pod IP): its containers start once their images are on its node
  // and its volumes are there. A pod already taken is left alone.
  void run(const json& pod);
  // The images the nodes hold and the registry they pull from (runtime/image_store.h).
  ImageStore& images();
  // The pod is being deleted: SIGTERM now, SIGKILL after `grace`. False when none of its processes runs (nothing to
  // wait for).
  bool stop(const std::string& ns, const std::string& name, std::chrono::seconds grace);
  // Starts container `container` of a running pod again after `delay` (restartPolicy Always, or OnFailure after a
  // failure: the kubelet's restart, with its crash-loop back-off as the delay), as the same launch: its volumes
  // stay, anything else it wrote is gone with the old process's private root. Dropped when the pod is stopped.
  void restart(const std::string& ns, const std::string& name, const std::string& container,
               std::chrono::milliseconds delay);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace torus::standin

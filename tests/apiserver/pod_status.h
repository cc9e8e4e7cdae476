#pragma once
// The simulated kubelet's pod status, as a kubelet writes it through a pod's life (kubelet_sim.h does the writes):
// the addresses it hands out, the conditions, the sandbox a bound pod gets first, and the containers' states as the
// process kubelet reports them (waiting with the kubelet's reason, then running).
#include <map>
#include <optional>
#include <string>

#include "tests/apiserver/pod_sandbox.h"
#include "tests/apiserver/store.h"

namespace torus::standin {

// Every address the simulation hands out is loopback (the whole 127.0.0.0/8 is local on Linux), so a client that
// connects to a node or pod IP, as the operator does to scrape rank 0, stays on this machine; distinct addresses
// still let pods bind the same ports. Node i is 127.1.x.y, its pods 127.(2 + i / 256).(i % 256).2-251.
std::string node_ip(int node_index);
std::string pod_subnet(int node_index);

// A pod (or node) condition stamped now.
json pod_condition(const std::string& type, const std::string& status, const std::string& reason = "",
                   const std::string& message = "");
bool has_condition(const json& pod, const std::string& type, const std::string& status, const std::string& reason);
// A fresh containerd://<32 hex> id.
std::string container_id();

// The sandbox of a pod bound to node `node_index`: its pod IP, host IP and start time, and then either its containers
// waiting (ContainerCreating, phase Pending: the process kubelet starts them) or, for a simulated kubelet without
// processes, running at once (phase Running, Ready).
enum class Containers { kStartLater, kRunAtOnce };
void make_sandbox(json& pod, int node_index, Containers containers);

// A Pending pod's containers as the process kubelet reported them: `waiting` (one container's reason and message,
// or every container's when it names none), else all started (running, Ready, phase Running) with their image ids.
// False when the pod is no longer Pending (nothing to write).
bool apply_progress(json& pod, const std::optional<Waiting>& waiting,
                    const std::map<std::string, std::string>& image_ids);

}  // namespace torus::standin

#pragma once
// Raw reads of the process environment: variables that are not Torus tunables (HOME, KUBECONFIG, the Kubernetes
// service variables, OMP_WAIT_POLICY), and TORUS_LOG_LEVEL for the logger, which must work even when another
// tunable is malformed (tunables::Snapshot refuses the whole environment then). Every other tunable is declared once
// in tunables.h and read from its snapshot.
#include <cstdint>
#include <optional>
#include <string>

namespace torus::env {

std::optional<std::string> get(const char* name);
std::string get_or(const char* name, const std::string& fallback);
// Throws InvalidArgument naming the variable when the value is not an integer.
int64_t get_int_or(const char* name, int64_t fallback);

// CPUs this process may use: the cgroup v2/v1 CPU quota if set, else sched affinity, at least 1.
int available_cpus();

}  // namespace torus::env

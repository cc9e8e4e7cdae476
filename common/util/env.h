#pragma once
// Reading tunables from the environment. Declare each tunable once, read it once (nccl-tests style).
#include <cstdint>
#include <optional>
#include <string>

namespace torus::env {

std::optional<std::string> get(const char* name);
std::string get_or(const char* name, const std::string& fallback);
// Throws InvalidArgument naming the variable when the value is not an integer.
int64_t get_int_or(const char* name, int64_t fallback);
double get_double_or(const char* name, double fallback);

// CPUs this process may use: the cgroup v2/v1 CPU quota if set, else sched affinity, at least 1.
int available_cpus();

}  // namespace torus::env

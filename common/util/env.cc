#include "common/util/env.h"

#include <sched.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/util/error.h"

namespace torus::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_or(const char* name, const std::string& fallback) { return get(name).value_or(fallback); }

int64_t get_int_or(const char* name, int64_t fallback) {
  auto v = get(name);
  if (!v) return fallback;
  try {
    size_t pos = 0;
    int64_t x = std::stoll(*v, &pos);
    if (pos == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string("environment variable ") + name + ": expected an integer, got '" + *v + "'");
}

namespace {

// cgroup v2: "max 100000" or "200000 100000"; cgroup v1: cfs_quota_us / cfs_period_us.
std::optional<double> cgroup_cpu_quota() {
  std::ifstream v2("/sys/fs/cgroup/cpu.max");
  if (v2) {
    std::string quota;
    double period = 0;
    if (v2 >> quota >> period && quota != "max" && period > 0) return std::stod(quota) / period;
    return std::nullopt;
  }
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double quota = -1, period = 0;
  if (q >> quota && p >> period && quota > 0 && period > 0) return quota / period;
  return std::nullopt;
}

}  // namespace

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = 1;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  if (auto quota = cgroup_cpu_quota()) n = std::min(n, static_cast<int>(std::ceil(*quota)));
  return std::max(n, 1);
}

}  // namespace torus::env

// standin-pod-exec PLAN -- PROGRAM [ARGS...]: what the process kubelet starts for each container. It enters the
// container's private root described by the JSON file PLAN (tests/apiserver/pod_root.h), becomes the container's
// user, and execs PROGRAM (looked up in the PATH of the environment it was given) with that environment, keeping
// its pid. A failure is written to stderr (the container's log) and ends the
// container with exit code 128, as a runtime's "cannot run" does.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/apiserver/pod_root.h"

namespace {

constexpr int kCannotRun = 128;

int fail(const std::string& why) {
  std::cerr << "standin-pod-exec: " << why << std::endl;
  return kCannotRun;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "--") return fail("usage: standin-pod-exec PLAN -- PROGRAM [ARGS...]");
  try {
    std::ifstream in(argv[1]);
    if (!in) return fail(std::string("cannot read the plan ") + argv[1]);
    const auto plan = torus::standin::root_plan_from_json(nlohmann::json::parse(in));
    torus::standin::enter_root(plan);
    torus::standin::become_user(plan);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  ::execvp(argv[3], argv + 3);
  return fail(std::string("exec ") + argv[3] + ": " + std::strerror(errno));
}

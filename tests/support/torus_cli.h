#pragma once
// Runs the real `torus` binary as a person would and finds its worker processes: for the end-to-end and
// conformance tests (which define TORUS_BINARY_DIR through torus_gtest and link torus_common).
#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/process/supervisor.h"

namespace torus::test {

inline const std::string kTorusBinary = std::string(TORUS_BINARY_DIR) + "/bin/torus";

struct RunOutput {
  int exit_code = -1;
  std::vector<std::string> lines;  // stdout and stderr, in arrival order
  std::string text() const {
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    return all;
  }
  std::string result_line() const {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->rfind("RESULT ", 0) == 0) return *it;
    return "";
  }
  // RESULT field value, e.g. field("accuracy").
  std::string field(const std::string& name) const {
    std::smatch m;
    const std::string r = result_line();
    if (std::regex_search(r, m, std::regex(" " + name + "=([^ ]+)"))) return m[1];
    return "";
  }
};

// Runs `torus args...` to completion (or `deadline`), calling `on_line` for every line as it arrives. `env` is added
// to the environment of torus (and so of its workers).
inline RunOutput run_torus(std::vector<std::string> args, std::chrono::seconds deadline,
                           const std::function<void(pid_t torus_pid, const std::string& line)>& on_line = nullptr,
                           std::map<std::string, std::string> env = {}) {
  RunOutput out;
  std::mutex mu;
  pid_t pid = 0;
  process::Supervisor sup([&](size_t, process::Stream, std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    out.lines.emplace_back(line);
    if (on_line) on_line(pid, std::string(line));
  });
  args.insert(args.begin(), kTorusBinary);
  env.emplace("TORUS_LOG_LEVEL", "info");
  // The rank logs `torus run` keeps (under $TMPDIR/torus-logs unless --log-dir) stay in the build tree, not /tmp.
  const std::string tmp = std::string(TORUS_BINARY_DIR) + "/Testing/tmp";
  std::filesystem::create_directories(tmp);
  env.emplace("TMPDIR", tmp);
  pid = sup.pid(sup.start(process::ProcessSpec{"torus", args, env}));
  auto t = sup.wait_any(std::chrono::duration_cast<std::chrono::milliseconds>(deadline));
  if (!t) {
    ADD_FAILURE() << "torus did not finish within " << deadline.count() << " s";
    sup.stop_all(std::chrono::milliseconds(5000));
    return out;
  }
  out.exit_code = t->shell_code();
  return out;
}

// The worker process of `rank` under the `torus` process `parent` (found through /proc: its RANK variable).
inline std::optional<pid_t> worker_pid(pid_t parent, int rank) {
  namespace fs = std::filesystem;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    if (!(stat >> pid >> comm >> state >> ppid) || ppid != parent) continue;
    std::ifstream environ(entry.path() / "environ");
    std::string var;
    while (std::getline(environ, var, '\0')) {
      if (var == "RANK=" + std::to_string(rank)) return static_cast<pid_t>(std::stoi(name));
    }
  }
  return std::nullopt;
}

}  // namespace torus::test

#pragma once
// Runs a shell command line from a test and captures what it printed: the CLI, packaging and Prometheus tests.
#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace torus::test {

struct ShellResult {
  int exit_code = -1;  // the command's exit code, or 128 + N when signal N ended it
  std::string output;  // stdout and stderr together
};

// `sh -c "(command) 2>&1"`. Throws when the shell cannot be started at all.
inline ShellResult run_shell(const std::string& command) {
  const std::string with_stderr = "(" + command + ") 2>&1";
  FILE* pipe = ::popen(with_stderr.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  ShellResult result;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) result.output.append(chunk, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace torus::test

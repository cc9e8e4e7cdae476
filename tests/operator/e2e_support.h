#pragma once
// What the operator end-to-end tests share: short commands run to completion, long-running daemons (the stand-in,
// the operator) with their output in log files, waiting for compound conditions, and starting the stand-in.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/process/supervisor.h"
#include "operator/controller/labels.h"
#include "tests/support/temp_dir.h"

namespace torus::controller::e2e {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

inline const std::string kBin = std::string(TORUS_BINARY_DIR) + "/bin/";
inline const std::string kKubectl = "/usr/bin/kubectl";

struct CmdResult {
  int code = -1;
  std::string out;
};

// Runs a short command to completion (bounded), capturing stdout and stderr.
inline CmdResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout = 60s) {
  CmdResult r;
  process::Supervisor sup([&](size_t, process::Stream, std::string_view line) { r.out.append(line).push_back('\n'); });
  sup.start({"cmd", argv, {}});
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto t = sup.wait_any(500ms)) {
      r.code = t->shell_code();
      return r;
    }
  }
  r.out += "(timed out)";
  return r;
}

// Polls `pred` until it holds or `timeout` passes (the stand-in offers no push for these compound conditions).
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

// A long-running child whose output goes to a log file (so its pipes never fill while the test is busy).
class Daemon {
 public:
  Daemon(std::string name, const std::vector<std::string>& argv, const std::string& log) : name_(std::move(name)) {
    std::string cmd = "exec";
    for (const auto& a : argv) cmd += " '" + a + "'";
    cmd += " >>'" + log + "' 2>&1";
    sup_ = std::make_unique<process::Supervisor>([](size_t, process::Stream, std::string_view) {});
    sup_->start({name_, {"/bin/sh", "-c", cmd}, {{"TORUS_LOG_LEVEL", "info"}}});
  }
  ~Daemon() { kill(SIGKILL); }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  // Signals and reaps (bounded); returns the exit status (shell convention), or -1 if it did not end in time.
  int kill(int sig, std::chrono::seconds within = 20s) {
    if (!sup_ || sup_->running() == 0) return exit_code_;
    sup_->signal(0, sig);
    auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto t = sup_->wait_any(200ms)) return exit_code_ = t->shell_code();
    }
    return -1;
  }
  bool alive() {
    if (sup_->running() == 0) return false;
    if (auto t = sup_->wait_any(0ms)) exit_code_ = t->shell_code();
    return sup_->running() > 0;
  }

 private:
  std::string name_;
  std::unique_ptr<process::Supervisor> sup_;
  int exit_code_ = -1;
};

// A gang's pods: exactly `workers` of them, none being deleted, all of `attempt` and Running.
inline bool all_running(const std::vector<json>& pods, int workers, int attempt) {
  if (static_cast<int>(pods.size()) != workers) return false;
  for (const auto& p : pods) {
    if (p["metadata"].contains("deletionTimestamp")) return false;
    if (p["metadata"]["labels"].value(std::string(kLabelAttempt), "") != std::to_string(attempt)) return false;
    if (p.value("status", json::object()).value("phase", "") != "Running") return false;
  }
  return true;
}

// Every daemon runs with TORUS_LOOPBACK_ONLY=1: a connection it tried beyond loopback (say, a scrape of a pod IP
// outside 127.0.0.0/8) was refused and logged, and fails the test here. Logs in subfolders (pods) count too.
inline void expect_stayed_on_loopback(const fs::path& dir) {
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);)
      if (line.find("refusing to connect") != std::string::npos) ADD_FAILURE() << entry.path() << ": " << line;
  }
}

// A failed test leaves the daemons' logs behind and says where.
inline void keep_logs_if_failed(test::TempDir& dir) {
  if (::testing::UnitTest::GetInstance()->failed_test_count() == 0 && !::testing::Test::HasFailure()) return;
  dir.set_on_exit(test::TempDir::OnExit::kKeep);
  std::fprintf(stderr, "logs of the stand-in and the operator kept in %s\n", dir.str().c_str());
}

// The Kubernetes API stand-in (HTTPS, authenticating) with its simulated kubelet (`kubelet_flags`: --nodes N
// [--racks R] [--run-pods DIR ...]), started in `dir`; returns once it has written `kubeconfig`.
inline std::unique_ptr<Daemon> start_standin(const fs::path& dir, const std::string& kubeconfig,
                                             const std::vector<std::string>& kubelet_flags) {
  std::vector<std::string> argv{kBin + "kube-standin", "--kubelet"};
  argv.insert(argv.end(), kubelet_flags.begin(), kubelet_flags.end());
  // HTTPS with token authentication, as every real apiserver: the operator and kubectl trust the stand-in's CA.
  argv.insert(argv.end(), {"--crds", std::string(TORUS_SOURCE_DIR) + "/crds", "--crds",
                           std::string(TORUS_SOURCE_DIR) + "/tests/operator/podgroup-crds", "--bookmark-interval-ms",
                           "500", "--kubeconfig", kubeconfig, "--tls-dir", (dir / "tls").string()});
  const std::string log = (dir / "standin.log").string();
  fs::remove(kubeconfig);  // only the file this stand-in writes may say where it listens
  auto standin = std::make_unique<Daemon>("kube-standin", argv, log);
  if (!eventually([&] { return fs::exists(kubeconfig) && fs::file_size(kubeconfig) > 0; }, 20s))
    throw std::runtime_error("kube-standin did not write " + kubeconfig + " within 20 s (see " + log + ")");
  return standin;
}

}  // namespace torus::controller::e2e

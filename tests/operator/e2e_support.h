#pragma once
// What the operator end-to-end tests share: short commands run to completion, long-running daemons (the stand-in,
// the operator) with their output in log files, waiting for compound conditions, starting the stand-in, and the
// OperatorE2E fixture (the stand-in's simulated kubelet and `torus operator` as real processes, driven by kubectl).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/process/supervisor.h"
#include "operator/controller/labels.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "tests/support/eventually.h"
#include "tests/support/product_images.h"
#include "tests/support/temp_dir.h"
#include "worker/comm/socket.h"

namespace torus::controller::e2e {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace res = kube::resources;

inline const std::string kBin = std::string(TORUS_BINARY_DIR) + "/bin/";
inline const std::string kKubectl = TORUS_KUBECTL;
inline constexpr const char* kNs = "default";

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

// A port free on loopback now, for a job's rendezvous and metrics ports (users link torus_comm).
inline int free_port() {
  const comm::Fd probe = comm::listen_tcp("127.0.0.1", 0);
  return comm::bound_port(probe);
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Polls `pred` until it holds or `timeout` passes (the stand-in offers no push for these compound conditions).
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 30s) {
  return torus::test::eventually(pred, timeout, 50ms);  // processes and kubectl: a coarser poll
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

// The operator's credentials as the Helm chart gives them in a cluster: the chart's ServiceAccount, ClusterRole,
// leader-election Role and their bindings (`helm template` of charts/torus-operator, release "torus" in `ns`) applied
// with the admin kubeconfig, then a kubeconfig authenticating as that account with a token the stand-in's
// TokenRequest API minted (`kubectl create token`). The stand-in evaluates RBAC, so an operator started with it may do
// what the chart grants and no more: a verb the chart lacks fails the test with a 403 naming it.
inline std::string chart_service_account_kubeconfig(const fs::path& dir, const std::string& admin_kubeconfig,
                                                    const std::string& ns) {
  const std::string chart = std::string(TORUS_SOURCE_DIR) + "/charts/torus-operator";
  CmdResult rendered = run_command({TORUS_HELM, "template", "torus", chart, "--namespace", ns, "--show-only",
                                    "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml"});
  if (rendered.code != 0) throw std::runtime_error("helm template " + chart + " failed: " + rendered.out);
  const std::string manifests = (dir / "chart-rbac.yaml").string();
  std::ofstream(manifests) << rendered.out;
  CmdResult applied = run_command({kKubectl, "--kubeconfig", admin_kubeconfig, "apply", "-f", manifests});
  if (applied.code != 0) throw std::runtime_error("kubectl apply of the chart's RBAC failed: " + applied.out);
  CmdResult token =
      run_command({kKubectl, "--kubeconfig", admin_kubeconfig, "create", "token", "torus-torus-operator", "-n", ns});
  if (token.code != 0 || token.out.empty()) throw std::runtime_error("kubectl create token failed: " + token.out);
  std::string minted = token.out.substr(0, token.out.find_last_not_of('\n') + 1);
  minted = minted.substr(minted.find_last_of('\n') + 1);  // the token is the last line printed
  std::ifstream in(admin_kubeconfig);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string admin_token = "token: standin-token";
  const size_t at = text.find(admin_token);
  if (at == std::string::npos) throw std::runtime_error(admin_kubeconfig + ": no \"" + admin_token + "\" to replace");
  text.replace(at, admin_token.size(), "token: " + minted);
  const std::string path = (dir / "operator-kubeconfig").string();
  std::ofstream(path) << text;
  return path;
}

// Why a suite that trains through pods cannot run here (no kubectl, a binary not built); nullopt when it can.
inline std::optional<std::string> missing_for_training_pods() {
  if (!fs::exists(kKubectl)) return "no kubectl at " + kKubectl;
  for (const char* bin : {"kube-standin", "torus"}) {
    if (!fs::exists(kBin + bin)) return std::string(bin) + " not built";
  }
  return std::nullopt;
}

// The worker image scripts/images.sh built (the product_images fixture): what every worker pod runs from.
inline const test::ProductImage& worker_image() {
  static const test::ProductImage image = test::product_image("torus-worker");
  return image;
}
// The line of pod_job_yaml's spec.gang that names it (tests insert a pod template after it).
inline std::string worker_image_line() { return "    image: " + worker_image().reference + "\n"; }

// A stand-in whose process kubelet runs each pod from its image (`topology`: --nodes N [--racks R]), the worker
// image loaded on every node as `kind load image-archive` does, each pod in <dir>/pods.
inline std::unique_ptr<Daemon> start_training_standin(const fs::path& dir, const std::string& kubeconfig,
                                                      std::vector<std::string> topology) {
  const std::vector<std::string> pods = {"--run-pods",   (dir / "pods").string(),  "--load-image",
                                         worker_image().archive, "--pod-env", "OMP_WAIT_POLICY=passive"};
  topology.insert(topology.end(), pods.begin(), pods.end());
  return start_standin(dir, kubeconfig, topology);
}

// The operator as the chart's ServiceAccount (RBAC enforced: a request the chart does not grant fails), reading the
// workers' progress each second so short jobs are followed; its log is <dir>/operator.log.
inline std::unique_ptr<Daemon> start_chart_operator(const fs::path& dir, const std::string& admin_kubeconfig) {
  const std::string kubeconfig = chart_service_account_kubeconfig(dir, admin_kubeconfig, kNs);
  return std::make_unique<Daemon>("operator",
                                  std::vector<std::string>{kBin + "torus", "operator", "--kubeconfig", kubeconfig,
                                                           "--metrics-addr", "127.0.0.1:0", "--progress-interval", "1"},
                                  (dir / "operator.log").string());
}

// A TrainingJob that trains through pods: the narrow ResNet-9 (8, 8, 16, 32) on synthetic 16x16 images of 4 classes
// (64 for validation), CPU workers of one thread each on the worker image, rendezvous and metrics ports free here,
// one-cycle at 0.1. The fields each suite varies:
struct PodJob {
  int workers = 2;
  int processes = 1;  // per worker
  int64_t train_images = 256;
  int batch = 32;
  int epochs = 1;
  // Items of the worker container's env, each "- {name: ..., value: ...}" (test hooks such as
  // TORUS_TEST_SIGSTOP_AT_STEP).
  std::vector<std::string> env;
  int checkpoint_every_steps = 0;  // 0: no checkpoints
  // The checkpoints' claim (1Gi), which the operator makes and mounts on worker 0: pods run isolated, so a folder on
  // no volume would be private to one pod and lost with it (false: such a folder, which the operator refuses).
  bool checkpoint_on_claim = true;
  std::string run_policy = "restartPolicy: ExitCode";  // lines under spec.runPolicy, newline-separated
  std::string more_spec;                               // fields under spec (two-space indented)
};
inline std::string pod_job_yaml(const std::string& name, const PodJob& j) {
  std::string env;
  if (!j.env.empty()) {
    env = "    template:\n      spec:\n        containers:\n        - name: worker\n          env:\n";
    for (const std::string& item : j.env) env += "          " + item + "\n";
  }
  const std::string checkpoint =
      j.checkpoint_every_steps == 0
          ? ""
          : "    checkpoint:\n      dir: /var/lib/torus/checkpoints\n      everySteps: " +
                std::to_string(j.checkpoint_every_steps) + "\n" +
                (j.checkpoint_on_claim
                     ? "      volumeClaimTemplate:\n        spec:\n          resources: {requests: {storage: 1Gi}}\n"
                     : "");
  std::string run_policy;
  std::istringstream lines(j.run_policy);
  for (std::string line; std::getline(lines, line);) run_policy += "    " + line + "\n";
  return "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name +
         "\nspec:\n  rendezvousPort: " + std::to_string(free_port()) +
         "\n  metricsPort: " + std::to_string(free_port()) + "\n  gang:\n    workers: " + std::to_string(j.workers) +
         "\n    processesPerWorker: " + std::to_string(j.processes) +
         "\n    device: cpu\n    threadsPerProcess: 1\n" + worker_image_line() + env +
         "  model:\n    arch: resnet9\n    widths: [8, 8, 16, 32]\n    numClasses: 4\n"
         "  data:\n    dataset: synthetic\n    imageSize: 16\n    loaderThreads: 1\n"
         "    synthetic:\n      trainImages: " +
         std::to_string(j.train_images) + "\n      validationImages: 64\n      numClasses: 4\n" +
         "  training:\n    epochs: " + std::to_string(j.epochs) + "\n    batchSize: " + std::to_string(j.batch) +
         "\n    lrSchedule:\n      type: one-cycle\n      peak: 0.1\n" + checkpoint + "  runPolicy:\n" + run_policy +
         j.more_spec;
}

// A fixture for the suites that train through pods with a stand-in of each test's own (preemption, straggler,
// disruption): SetUp skips where kubectl or a binary is missing, starts the stand-in (`topology`: --nodes N) in a
// fresh folder named `prefix` and, with OperatorStart::kAtSetUp, the operator as the chart's ServiceAccount; TearDown
// stops the operator before the stand-in, fails the test on a connection beyond loopback and keeps a failed test's
// logs.
class PodTrainingE2E : public ::testing::Test {
 protected:
  enum class OperatorStart { kAtSetUp, kByTest };
  PodTrainingE2E(std::string prefix, std::vector<std::string> topology, OperatorStart start)
      : prefix_(std::move(prefix)), topology_(std::move(topology)), operator_start_(start) {}

  void SetUp() override {
    if (auto missing = missing_for_training_pods()) GTEST_SKIP() << *missing;
    tmp_ = std::make_unique<test::TempDir>(prefix_);
    dir_ = tmp_->path();
    kubeconfig_ = (dir_ / "kubeconfig").string();
    standin_ = start_training_standin(dir_, kubeconfig_, topology_);
    client_ = std::make_unique<kube::Client>(kube::load_kubeconfig(kubeconfig_), kube::ClientOptions{});
    if (operator_start_ == OperatorStart::kAtSetUp) start_operator();
  }
  void TearDown() override {
    operator_.reset();
    standin_.reset();
    client_.reset();
    if (tmp_) expect_stayed_on_loopback(dir_);
    if (tmp_) keep_logs_if_failed(*tmp_);
  }
  // Progress, the ledger and every rank's arrival figures read each second (start_chart_operator).
  void start_operator() { operator_ = start_chart_operator(dir_, kubeconfig_); }

  CmdResult kubectl(std::vector<std::string> args, std::chrono::seconds timeout = 60s) const {
    args.insert(args.begin(), {kKubectl, "--kubeconfig", kubeconfig_, "--namespace", kNs});
    return run_command(args, timeout);
  }
  std::vector<json> pods_of(const std::string& job) const {
    const json list = client_->list(res::kPods, kNs, {std::string(kLabelJobName) + "=" + job, "", ""});
    return list.value("items", json::array()).get<std::vector<json>>();
  }
  json status_of(const std::string& job) const {
    auto j = client_->try_get(res::kTrainingJobs, kNs, job);
    return j ? j->value("status", json::object()) : json::object();
  }
  // The job's uid: its run, whose checkpoints are <dir>/<uid>/ckpt-<step>.torus (common/launch/checkpoint_layout.h).
  std::string uid_of(const std::string& job) const {
    auto j = client_->try_get(res::kTrainingJobs, kNs, job);
    return j ? j->value("metadata", json::object()).value("uid", "") : "";
  }
  // The folder the process kubelet gave a pod (<root>/<ns>/<name>-<uid>); it outlives the pod, with its log.
  fs::path pod_dir(const json& pod) const {
    return dir_ / "pods" / kNs / (pod["metadata"].value("name", "") + "-" + pod["metadata"].value("uid", ""));
  }

  std::unique_ptr<test::TempDir> tmp_;
  fs::path dir_;
  std::string kubeconfig_;
  std::unique_ptr<Daemon> standin_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Daemon> operator_;

 private:
  std::string prefix_;
  std::vector<std::string> topology_;
  OperatorStart operator_start_;
};

// A stand-in of one test's own (started in a fresh temporary folder with `kubelet_flags`) and a client to it, for the
// fixtures that start one per test. finish() (after the test's operator is stopped) stops it, fails the test on a
// connection beyond loopback, and keeps the logs of a failed test.
struct StandinSession {
  std::unique_ptr<test::TempDir> tmp;
  fs::path dir;
  std::string kubeconfig;
  kube::ClusterConfig config;
  std::unique_ptr<Daemon> standin;
  std::unique_ptr<kube::Client> client;

  void start(const std::string& prefix, const std::vector<std::string>& kubelet_flags) {
    tmp = std::make_unique<test::TempDir>(prefix);
    dir = tmp->path();
    kubeconfig = (dir / "kubeconfig").string();
    standin = start_standin(dir, kubeconfig, kubelet_flags);
    config = kube::load_kubeconfig(kubeconfig);
    client = std::make_unique<kube::Client>(config, kube::ClientOptions{.qps = 500, .burst = 500});
  }
  void finish() {
    standin.reset();
    client.reset();
    if (tmp) expect_stayed_on_loopback(dir);
    if (tmp) keep_logs_if_failed(*tmp);
  }
};

// The worker container mounts a hostPath at /ckpt (spec.gang.template, four-space indented): checkpoints on storage
// that outlives pods, which the operator requires of a job that restarts (operator/controller/checkpoint_storage.h).
inline const std::string kCheckpointHostPath =
    "    template:\n      spec:\n        containers: [{name: worker, volumeMounts: [{name: ckpt, mountPath: /ckpt}]}]\n"
    "        volumes: [{name: ckpt, hostPath: {path: /var/lib/torus/ckpt}}]\n";

// A tiny 1-epoch CPU job on synthetic data (restartPolicy ExitCode); `run_policy_extra` goes under spec.runPolicy.
inline std::string job_yaml(const std::string& name, int workers, const std::string& run_policy_extra = "") {
  return "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name +
         "\nspec:\n  gang:\n    workers: " + std::to_string(workers) + "\n    device: cpu\n" + kCheckpointHostPath +
         "  model:\n    arch: resnet9\n  data:\n    dataset: synthetic\n"
         "  training:\n    epochs: 1\n    batchSize: " +
         std::to_string(32 * workers) +
         "\n    lrSchedule:\n      type: one-cycle\n      peak: 0.1\n"
         "    checkpoint:\n      dir: /ckpt\n  runPolicy:\n    restartPolicy: ExitCode\n" +
         run_policy_extra;
}

// The stand-in (8 simulated nodes in 2 racks, pods never run) and one operator "op-a", shared by a suite.
class OperatorE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kKubectl)) GTEST_SKIP() << "no kubectl at " << kKubectl;
    if (!fs::exists(kBin + "kube-standin")) GTEST_SKIP() << "kube-standin not built";
    tmp_ = std::make_unique<test::TempDir>("torus-operator-e2e");
    dir_ = tmp_->path();
    kubeconfig_ = (dir_ / "kubeconfig").string();
    standin_ = start_standin(dir_, kubeconfig_, {"--nodes", "8", "--racks", "2"});
    config_ = kube::load_kubeconfig(kubeconfig_);
    client_ = std::make_unique<kube::Client>(config_, kube::ClientOptions{.qps = 500, .burst = 500});
    // The operators run as the chart's ServiceAccount (RBAC enforced); the tests' kubectl and client_ are admin.
    operator_kubeconfig_ = chart_service_account_kubeconfig(dir_, kubeconfig_, kNs);
    start_operator("op-a");
  }
  static void TearDownTestSuite() {
    operators_.clear();
    standin_.reset();
    client_.reset();
    if (tmp_) expect_stayed_on_loopback(dir_);
    if (tmp_) keep_logs_if_failed(*tmp_);
    tmp_.reset();
  }

  // The default lease is short enough that a SIGKILLed leader is replaced within seconds, long enough that a leader
  // starved of CPU for a few seconds on a 2-core CI machine keeps it.
  static void start_operator(const std::string& id, std::chrono::seconds lease_duration = 5s) {
    std::vector<std::string> argv{kBin + "torus", "operator", "--kubeconfig", operator_kubeconfig_};
    argv.insert(argv.end(), {"--metrics-addr", "127.0.0.1:0", "--leader-elect", "--id", id, "--lease-namespace", kNs});
    argv.insert(argv.end(), {"--lease-duration", std::to_string(lease_duration.count()), "--renew-deadline", "4",
                             "--retry-period", "0.5"});
    argv.insert(argv.end(), operator_flags_.begin(), operator_flags_.end());
    operators_[id] = std::make_unique<Daemon>(id, argv, (dir_ / (id + ".log")).string());
  }

  // The sum of the samples of `name` on operator `id`'s /metrics whose labels include every one of `labels`
  // (`code="500"`), as the operator counts what it saw; -1 when its metrics cannot be read.
  static double operator_metric(const std::string& id, const std::string& name,
                                const std::vector<std::string>& labels) {
    std::smatch m;
    const std::string log = read_file(dir_ / (id + ".log"));
    if (!std::regex_search(log, m, std::regex("metrics on (http://[0-9.]+:[0-9]+)/metrics"))) return -1;
    kube::ClusterConfig target;
    target.server = m[1];
    const kube::HttpResponse r = kube::make_http_transport(target, {})->send({"GET", "/metrics", "", "text/plain", {}});
    if (r.status != 200) return -1;
    double sum = 0;
    std::istringstream lines(r.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + "{", 0) != 0) continue;
      const std::string labelset = line.substr(0, line.find('}'));
      bool all = true;
      for (const std::string& l : labels) all = all && labelset.find(l) != std::string::npos;
      if (all) sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  static CmdResult kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), {kKubectl, "--kubeconfig", kubeconfig_, "--namespace", kNs});
    return run_command(args);
  }

  static json control(const std::string& endpoint, const json& body) {
    auto transport = kube::make_http_transport(config_, {});
    kube::HttpResponse r = transport->send({"POST", "/_standin/" + endpoint, body.dump(), "application/json", {}});
    EXPECT_EQ(r.status, 200) << endpoint << " " << body.dump() << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }

  void apply(const std::string& name, int workers, const std::string& extra = "") {
    std::string file = (dir_ / (name + ".yaml")).string();
    std::ofstream(file) << job_yaml(name, workers, extra);
    CmdResult r = kubectl({"apply", "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }

  static std::vector<json> pods_of(const std::string& job) {
    json list = client_->list(res::kPods, kNs, {std::string(kLabelJobName) + "=" + job, "", ""});
    return list.value("items", json::array()).get<std::vector<json>>();
  }
  static std::optional<json> job(const std::string& name) { return client_->try_get(res::kTrainingJobs, kNs, name); }
  static std::string phase(const std::string& name) {
    auto j = job(name);
    return j ? j->value("status", json::object()).value("phase", "") : "<gone>";
  }
  static std::string failed_reason(const std::string& name) {
    auto j = job(name);
    if (!j) return "<gone>";
    for (const auto& c : j->value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "Failed" && c.value("status", "") == "True") return c.value("reason", "");
    }
    return "";
  }

  // Every pod of the job running, `workers` of them, all in `attempt`.
  static bool gang_running(const std::string& job, int workers, int attempt) {
    return all_running(pods_of(job), workers, attempt);
  }

  void wait_phase(const std::string& name, const std::string& want, std::chrono::seconds timeout = 30s) {
    CmdResult r = kubectl({"wait", "--for=jsonpath={.status.phase}=" + want, "trainingjob/" + name,
                           "--timeout=" + std::to_string(timeout.count()) + "s"});
    ASSERT_EQ(r.code, 0) << name << " never reached " << want << " (now " << phase(name) << "): " << r.out;
  }

  static void terminate(const std::string& pod, int code) {
    control("kubelet", {{"action", "terminate"}, {"namespace", kNs}, {"name", pod}, {"exitCode", code}});
  }

  static std::string lease_holder() {
    auto lease = client_->try_get(res::kLeases, kNs, "torus-operator");
    return lease ? lease->value("spec", json::object()).value("holderIdentity", "") : "";
  }

  inline static std::unique_ptr<test::TempDir> tmp_;
  inline static fs::path dir_;
  inline static std::string kubeconfig_;
  inline static std::string operator_kubeconfig_;  // the chart's ServiceAccount (chart_service_account_kubeconfig)
  inline static kube::ClusterConfig config_;
  inline static std::unique_ptr<Daemon> standin_;
  inline static std::map<std::string, std::unique_ptr<Daemon>> operators_;
  inline static std::unique_ptr<kube::Client> client_;
  inline static std::vector<std::string>
      operator_flags_;  // more flags for `torus operator` (set before SetUpTestSuite)
};

}  // namespace torus::controller::e2e

// The real path end to end: `kubectl apply` a TrainingJob on the API stand-in whose kubelet runs pods as local
// processes (tests/apiserver/process_kubelet.h), the real operator makes the pods, and real torus-worker processes
// train on tiny synthetic data, each pod on its own 127.x address. Progress comes from rank 0's real /metrics; a
// SIGKILLed worker restarts the gang from its checkpoint; suspend checkpoints and stops, resume continues.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/process/worker_events.h"
#include "operator/kube/transport.h"
#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

class TrainingE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (auto missing = missing_for_training_pods()) GTEST_SKIP() << *missing;
    tmp_ = std::make_unique<test::TempDir>("torus-training-e2e");
    dir_ = tmp_->path();
    kubeconfig_ = (dir_ / "kubeconfig").string();
    standin_ = start_training_standin(dir_, kubeconfig_, {"--nodes", "4", "--racks", "2"});
    client_ = std::make_unique<kube::Client>(kube::load_kubeconfig(kubeconfig_), kube::ClientOptions{});
    // The tests' kubectl and client_ are admin; the operator is not.
    operator_ = start_chart_operator(dir_, kubeconfig_);
  }
  static void TearDownTestSuite() {
    prometheus_.reset();
    operator_.reset();
    standin_.reset();
    client_.reset();
    if (tmp_) expect_stayed_on_loopback(dir_);
    if (tmp_) keep_logs_if_failed(*tmp_);
    tmp_.reset();
  }

  // A small CPU job on synthetic data: `workers` pods of `processes` ranks, checkpoints every 2 steps on a claim;
  // `more_spec` adds fields under spec (two-space indented).
  static std::string job_yaml(const std::string& name, int workers, int processes, int epochs,
                              const std::string& more_spec = "") {
    return pod_job_yaml(name, {.workers = workers,
                               .processes = processes,
                               .epochs = epochs,
                               .checkpoint_every_steps = 2,
                               .more_spec = more_spec});
  }

  static CmdResult kubectl(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
    args.insert(args.begin(), {kKubectl, "--kubeconfig", kubeconfig_, "--namespace", kNs});
    return run_command(args, timeout);
  }

  void apply(const std::string& name, int workers, int processes, int epochs, const std::string& more_spec = "") {
    const std::string file = (dir_ / (name + ".yaml")).string();
    std::ofstream(file) << job_yaml(name, workers, processes, epochs, more_spec);
    const CmdResult r = kubectl({"apply", "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }

  // `yaml` with `variable`=`value` in the worker container's environment, through the job's pod template.
  static std::string with_worker_env(std::string yaml, const std::string& variable, const std::string& value) {
    const std::string image = worker_image_line();
    yaml.replace(yaml.find(image), image.size(),
                 image +
                     "    template:\n      spec:\n        containers:\n        - name: worker\n          env:\n"
                     "          - {name: " +
                     variable + ", value: \"" + value + "\"}\n");
    return yaml;
  }

  void apply_yaml(const std::string& name, const std::string& yaml) {
    const std::string file = (dir_ / (name + ".yaml")).string();
    std::ofstream(file) << yaml;
    const CmdResult r = kubectl({"apply", "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }

  // Applies `yaml` with restartPolicy Never (the first failure is the job's) and `variable`=`value` in the worker
  // container's environment.
  void apply_failing_once(const std::string& name, std::string yaml, const std::string& variable,
                          const std::string& value) {
    yaml.replace(yaml.find("restartPolicy: ExitCode"), 23, "restartPolicy: Never");
    apply_yaml(name, with_worker_env(yaml, variable, value));
  }

  // The user ends a job that would otherwise train far longer than the test: `kubectl delete`, then its pods go.
  void delete_job(const std::string& name) {
    const CmdResult r = kubectl({"delete", "trainingjob", name, "--wait=true", "--timeout=60s"}, 70s);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(eventually([&] { return pods_of(name).empty(); }, 60s)) << pods_of(name).size() << " pods left";
  }

  static std::vector<json> pods_of(const std::string& job) {
    const json list = client_->list(res::kPods, kNs, {std::string(kLabelJobName) + "=" + job, "", ""});
    return list.value("items", json::array()).get<std::vector<json>>();
  }
  static json status_of(const std::string& job) {
    auto j = client_->try_get(res::kTrainingJobs, kNs, job);
    return j ? j->value("status", json::object()) : json::object();
  }
  static std::string phase(const std::string& job) { return status_of(job).value("phase", ""); }
  // The job's uid: its run, whose checkpoints are <dir>/<uid>/ckpt-<step>.torus (common/launch/checkpoint_layout.h).
  static std::string uid_of(const std::string& job) {
    auto j = client_->try_get(res::kTrainingJobs, kNs, job);
    return j ? j->value("metadata", json::object()).value("uid", "") : "";
  }

  void wait_phase(const std::string& name, const std::string& want, std::chrono::seconds timeout = 120s) {
    const CmdResult r = kubectl({"wait", "--for=jsonpath={.status.phase}=" + want, "trainingjob/" + name,
                                 "--timeout=" + std::to_string(timeout.count()) + "s"},
                                timeout + 10s);
    ASSERT_EQ(r.code, 0) << name << " never reached " << want << " (now " << phase(name) << "): " << r.out
                         << "\nlogs:\n"
                         << logs_of(name);
  }

  // The folder the process kubelet gave a pod (<root>/<ns>/<name>-<uid>).
  static fs::path pod_dir(const json& pod) {
    return dir_ / "pods" / kNs / (pod["metadata"].value("name", "") + "-" + pod["metadata"].value("uid", ""));
  }
  // The pid of a pod's worker process, as the process kubelet recorded it.
  static pid_t worker_pid(const json& pod) { return std::stoi(read_file(pod_dir(pod) / "worker.pid")); }
  static std::optional<json> pod_named(const std::string& job, const std::string& name) {
    for (const json& pod : pods_of(job)) {
      if (pod["metadata"].value("name", "") == name) return pod;
    }
    return std::nullopt;
  }
  // The state letter of /proc/PID/stat ('T': stopped by a signal), or 0 when the process is gone.
  static char state_of(pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
  }
  // Every log the job's pods wrote so far, pods of every attempt.
  static std::string logs_of(const std::string& job) {
    std::string all;
    if (!fs::exists(dir_ / "pods" / kNs)) return all;
    for (const auto& entry : fs::directory_iterator(dir_ / "pods" / kNs)) {
      if (entry.path().filename().string().rfind(job + "-worker-", 0) != 0) continue;
      all += "== " + entry.path().filename().string() + "\n" + read_file(entry.path() / "worker.log");
    }
    return all;
  }
  // The ranks that announced their start with `world` ranks (in `attempt`, when given), from the pods' logs.
  static std::set<int> started_ranks(const std::string& job, int world, int attempt = -1) {
    std::set<int> ranks;
    std::istringstream logs(logs_of(job));
    for (std::string line; std::getline(logs, line);) {
      const auto e = process::parse_event(line);
      const auto* started = e ? std::get_if<process::StartedEvent>(&*e) : nullptr;
      if (started && started->world_size == world && (attempt < 0 || started->attempt == attempt))
        ranks.insert(started->rank);
    }
    return ranks;
  }
  // The ranks whose /metrics answer on the ports the chart's PodMonitor keeps: every container port named
  // metrics(-N)?, at the pod's IP (a real Prometheus is not installed here; this is its target list).
  static std::set<int> scraped_ranks(const std::string& job) {
    static const std::regex kKept("metrics(-[0-9]+)?");
    static const std::regex kRank("torus_worker_global_step\\{[^}]*rank=\"([0-9]+)\"");
    std::set<int> ranks;
    for (const json& pod : pods_of(job)) {
      const std::string ip = pod.value("status", json::object()).value("podIP", "");
      for (const json& port : pod["spec"]["containers"][0]["ports"]) {
        if (ip.empty() || !std::regex_match(port.value("name", ""), kKept)) continue;
        try {
          kube::ClusterConfig target;
          target.server = "http://" + ip + ":" + std::to_string(port.value("containerPort", 0));
          const auto r = kube::make_http_transport(target, kube::TransportOptions{2s})
                             ->send({"GET", "/metrics", "", "text/plain", {}});
          std::smatch m;
          if (r.status == 200 && std::regex_search(r.body, m, kRank)) ranks.insert(std::stoi(m[1]));
        } catch (const std::exception&) {
          // not serving yet (or already done)
        }
      }
    }
    return ranks;
  }
  // A real Prometheus that scrapes the worker pods with the relabelings of the chart's PodMonitor
  // (charts/torus-operator/templates/podmonitor.yaml: the operator's worker pods, every container port named
  // metrics(-N)?), as the prometheus-operator translates it. Debian's Prometheus has no Kubernetes discovery, so the
  // pod role's targets (every container port of every pod, with its __meta_kubernetes_* labels) come from a file
  // the test writes from the stand-in's pods (write_pod_targets). Returns its port once ready.
  static int start_prometheus() {
    const int port = free_port();
    std::ofstream(dir_ / "targets.json") << "[]";
    std::ofstream(dir_ / "prometheus.yml")
        << "global: {scrape_interval: 1s}\n"
           "scrape_configs:\n"
           "- job_name: podMonitor/torus-workers\n"
           "  honor_labels: true\n"
           "  metrics_path: /metrics\n"
           "  file_sd_configs:\n"
           "  - files: ["
        << (dir_ / "targets.json").string()
        << "]\n"
           "  relabel_configs:\n"
           "  - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_managed_by, "
           "__meta_kubernetes_pod_label_torus_dev_role]\n"
           "    regex: torus-operator;worker\n"
           "    action: keep\n"
           "  - source_labels: [__meta_kubernetes_pod_container_port_name]\n"
           "    regex: metrics(-[0-9]+)?\n"
           "    action: keep\n";
    prometheus_ = std::make_unique<Daemon>(
        "prometheus",
        std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
                                 "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        (dir_ / "prometheus.log").string());
    if (!eventually([&] { return prometheus_get(port, "/-/ready").first == 200; }, 30s)) return 0;
    return port;
  }
  // What Kubernetes pod discovery finds for `job`'s pods: each declared container port at the pod IP.
  static void write_pod_targets(const std::string& job) {
    json groups = json::array();
    for (const json& pod : pods_of(job)) {
      const json& labels = pod["metadata"]["labels"];
      for (const json& port : pod["spec"]["containers"][0]["ports"]) {
        groups.push_back(
            {{"targets", {pod["status"].value("podIP", "") + ":" + std::to_string(port.value("containerPort", 0))}},
             {"labels",
              {{"__meta_kubernetes_pod_label_app_kubernetes_io_managed_by",
                labels.value("app.kubernetes.io/managed-by", "")},
               {"__meta_kubernetes_pod_label_torus_dev_role", labels.value("torus.dev/role", "")},
               {"__meta_kubernetes_pod_container_port_name", port.value("name", "")}}}});
      }
    }
    std::ofstream(dir_ / "targets.json.new") << groups.dump();
    fs::rename(dir_ / "targets.json.new", dir_ / "targets.json");
  }
  static std::pair<int, std::string> prometheus_get(int port, const std::string& path) {
    try {
      kube::ClusterConfig target;
      target.server = "http://127.0.0.1:" + std::to_string(port);
      const auto r = kube::make_http_transport(target, kube::TransportOptions{5s})->send({"GET", path, "", "", {}});
      return {r.status, r.body};
    } catch (const std::exception& e) {
      return {0, e.what()};
    }
  }
  // The ranks of `job` Prometheus scraped a torus_worker_global_step of.
  static std::set<int> prometheus_ranks(int port, const std::string& job) {
    // last_over_time: a finished rank's series went stale, and still counts as scraped.
    const auto r = prometheus_get(
        port, "/api/v1/query?query=last_over_time(torus_worker_global_step%7Bjob%3D%22" + job + "%22%7D%5B10m%5D)");
    std::set<int> ranks;
    const json reply = json::parse(r.second, nullptr, false);
    if (r.first != 200 || reply.is_discarded()) return ranks;
    for (const json& series : reply["data"]["result"]) ranks.insert(std::stoi(series["metric"].value("rank", "-1")));
    return ranks;
  }
  // The messages of the job's events with `reason`.
  static std::vector<std::string> events_of(const std::string& job, const std::string& reason) {
    const json list = client_->list(res::kEvents, kNs, {"", "involvedObject.name=" + job + ",reason=" + reason, ""});
    std::vector<std::string> out;
    for (const json& e : list.value("items", json::array())) out.push_back(e.value("message", ""));
    return out;
  }
  // The job's claim folder on the process kubelet's host (<root>/_claims/<ns>/<claim>-<uid>).
  static fs::path claim_folder(const std::string& job) {
    for (const auto& entry : fs::directory_iterator(dir_ / "pods" / "_claims" / kNs)) {
      if (entry.path().filename().string().rfind(job + "-checkpoint-", 0) == 0) return entry.path();
    }
    return {};
  }
  static int attempt_of(const json& pod) {
    return std::stoi(pod["metadata"]["labels"].value(std::string(kLabelAttempt), "-1"));
  }

  static std::unique_ptr<test::TempDir> tmp_;
  static fs::path dir_;
  static std::string kubeconfig_;
  static std::unique_ptr<Daemon> standin_;
  static std::unique_ptr<Daemon> operator_;
  static std::unique_ptr<kube::Client> client_;
  static std::unique_ptr<Daemon> prometheus_;
};

std::unique_ptr<test::TempDir> TrainingE2E::tmp_;
fs::path TrainingE2E::dir_;
std::string TrainingE2E::kubeconfig_;
std::unique_ptr<Daemon> TrainingE2E::standin_;
std::unique_ptr<Daemon> TrainingE2E::operator_;
std::unique_ptr<kube::Client> TrainingE2E::client_;
std::unique_ptr<Daemon> TrainingE2E::prometheus_;

TEST_F(TrainingE2E, TwoCpuWorkersTrainAndTheStatusShowsTheirRealProgress) {
  // The 20 epochs train in 1.5 s here, about one of the operator's 1 s reads of rank 0's /metrics: a faster machine
  // could finish before any. So rank 1 stops itself after step 9 (attempt 0 only) and rank 0 waits for it in the
  // next all-reduce, still serving /metrics: the job is Running, mid-training, until the test continues rank 1.
  ASSERT_NO_FATAL_FAILURE(
      apply_yaml("alpha", with_worker_env(job_yaml("alpha", 2, 1, 20, "  allReduce:\n    algorithm: ring\n"),
                                          "TORUS_TEST_SIGSTOP_AT_STEP", "1:9")));
  pid_t held = 0;
  ASSERT_TRUE(eventually(
      [&] {
        const auto pod = pod_named("alpha", "alpha-worker-1");
        if (!pod || !fs::exists(pod_dir(*pod) / "worker.pid")) return false;
        held = worker_pid(*pod);
        return state_of(held) == 'T';
      },
      120s))
      << status_of("alpha").dump() << "\n"
      << logs_of("alpha");
  // On every path out, rank 1 goes on (a failed check must not leave the gang waiting for it).
  struct ContinueOnExit {
    pid_t pid;
    ~ContinueOnExit() {
      if (pid > 0) ::kill(pid, SIGCONT);
    }
  } continue_on_exit{held};
  // rank 0's /metrics, read by the operator on rank 0's pod IP while the gang trains.
  ASSERT_TRUE(eventually(
      [] {
        const json p = status_of("alpha").value("progress", json::object());
        return p.value("step", 0) > 0 && p.value("imagesPerSecond", 0.0) > 0 &&
               !p.value("allReduceAlgorithm", "").empty();
      },
      120s))
      << status_of("alpha").dump() << "\n"
      << logs_of("alpha");
  EXPECT_EQ(phase("alpha"), "Running");
  ASSERT_EQ(::kill(held, SIGCONT), 0);
  continue_on_exit.pid = 0;
  wait_phase("alpha", "Succeeded");
  const json progress = status_of("alpha")["progress"];
  EXPECT_GT(progress.value("step", 0), 0) << progress.dump();
  // spec.allReduce.algorithm reached the ranks, and the status names what ran.
  EXPECT_EQ(progress.value("allReduceAlgorithm", ""), "ring") << progress.dump();
  EXPECT_EQ(started_ranks("alpha", 2), (std::set<int>{0, 1})) << logs_of("alpha");
  std::set<std::string> ips;
  for (const json& pod : pods_of("alpha")) {
    EXPECT_EQ(pod["status"]["phase"], "Succeeded");
    ips.insert(pod["status"].value("podIP", ""));
  }
  EXPECT_EQ(ips.size(), 2u) << "each pod has its own address";
}

TEST_F(TrainingE2E, TwoWorkersOfTwoProcessesFormAWorldOfFour) {
  // On 2 nodes of 2 ranks the cost model picks hierarchical (measured); the job asks for ring, and ring is what ran.
  const int prometheus = fs::exists("/usr/bin/prometheus") ? start_prometheus() : 0;
  // Far more epochs than the test waits for: the ranks must still serve /metrics when Prometheus, whose discovery
  // hands new targets to its scrapers only every 5 s, gets to them, on any machine. The test ends the job itself.
  ASSERT_NO_FATAL_FAILURE(apply("beta", 2, 2, 10000, "  allReduce:\n    algorithm: ring\n"));
  // Issue 27.4: each pod names one metrics port per local rank, and every rank answers on its own; a real
  // Prometheus configured as the chart's PodMonitor scrapes all four.
  ASSERT_TRUE(eventually([] { return scraped_ranks("beta") == std::set<int>{0, 1, 2, 3}; }, 120s)) << logs_of("beta");
  if (prometheus != 0) {
    write_pod_targets("beta");
    EXPECT_TRUE(eventually(
        [&] {
          return prometheus_ranks(prometheus, "beta") == std::set<int>{0, 1, 2, 3};
        },
        60s))
        << prometheus_get(prometheus, "/api/v1/targets").second;
  } else if (fs::exists("/usr/bin/prometheus")) {
    ADD_FAILURE() << "Prometheus did not start: " << read_file(dir_ / "prometheus.log");
  }
  for (const json& pod : pods_of("beta")) {
    EXPECT_NE(pod["spec"]["volumes"].dump().find(R"("medium":"Memory")"), std::string::npos) << "/dev/shm";
  }
  // What rank 0 trains with, as the operator reads it from rank 0's /metrics.
  EXPECT_TRUE(eventually(
      [] { return status_of("beta").value("progress", json::object()).value("allReduceAlgorithm", "") == "ring"; },
      60s))
      << status_of("beta").dump();
  EXPECT_EQ(phase("beta"), "Running");
  EXPECT_EQ(started_ranks("beta", 4), (std::set<int>{0, 1, 2, 3})) << logs_of("beta");
  const std::string logs = logs_of("beta");
  EXPECT_NE(logs.find("started local ranks 0..1 of 4"), std::string::npos) << logs;
  EXPECT_NE(logs.find("started local ranks 2..3 of 4"), std::string::npos) << logs;
  // The user ends the job; its pods go with it, and the next test gets the machine.
  ASSERT_NO_FATAL_FAILURE(delete_job("beta"));
}

TEST_F(TrainingE2E, ASigkilledWorkerRestartsTheGangFromItsCheckpoint) {
  // Far more epochs than the test waits for (80 train in ~4 s here): the kill must land while attempt 0 trains, and
  // the operator must read attempt 1's /metrics (the step it resumed from, its ledger, a later checkpoint) while it
  // trains, on any machine. The test ends the job itself.
  ASSERT_NO_FATAL_FAILURE(apply("gamma", 2, 1, 10000));
  ASSERT_TRUE(eventually([] { return logs_of("gamma").find("checkpoint written") != std::string::npos; }, 120s))
      << logs_of("gamma");
  // The ledger holds a reading of this attempt (the survivor's last step is added to it).
  ASSERT_TRUE(
      eventually([] { return status_of("gamma").value("goodput", json::object()).value("lastStep", 0) > 0; }, 60s))
      << status_of("gamma").dump();
  const std::optional<json> victim = pod_named("gamma", "gamma-worker-1");
  ASSERT_TRUE(victim);
  const int first_attempt = attempt_of(*victim);
  ASSERT_EQ(::kill(worker_pid(*victim), SIGKILL), 0);
  ASSERT_TRUE(eventually([&] { return all_running(pods_of("gamma"), 2, first_attempt + 1); }, 60s))
      << status_of("gamma").dump() << "\n"
      << logs_of("gamma");
  // The operator read the new attempt: the step it resumed from, its ledger, and a checkpoint it wrote since.
  json status;
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("gamma");
        const json resumed = status.value("resumedFrom", json::object());
        return resumed.value("attempt", -1) == first_attempt + 1 &&
               status.value("goodput", json::object()).value("attempt", -1) == first_attempt + 1 &&
               status.value("lastCheckpoint", json::object()).value("step", 0) > resumed.value("step", 0);
      },
      120s))
      << status.dump() << "\n"
      << logs_of("gamma");
  EXPECT_EQ(status.value("phase", ""), "Running") << status.dump();
  std::string resumed;
  for (const json& pod : pods_of("gamma")) {
    EXPECT_EQ(attempt_of(pod), first_attempt + 1);
    resumed += read_file(pod_dir(pod) / "worker.log");
  }
  // Rank 0 logs the step before its /metrics show it, and the status came from there.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(resumed, m, std::regex("resuming at step ([0-9]+)"))) << resumed;
  EXPECT_GT(std::stoi(m[1]), 0) << resumed;
  // The status and the events say it: the step attempt 1 resumed from, the checkpoint on the claim.
  EXPECT_EQ(status["resumedFrom"].value("step", -1), std::stoi(m[1])) << status.dump();
  const std::string path = "/var/lib/torus/checkpoints/" + uid_of("gamma") + "/ckpt-" + m[1].str() + ".torus";
  EXPECT_EQ(status["resumedFrom"].value("path", ""), path) << status.dump();
  EXPECT_EQ(status["resumedFrom"].value("run", ""), uid_of("gamma")) << status.dump();
  EXPECT_EQ(status["resumedFrom"].value("reason", ""), "ThisRun") << status.dump();
  // The lost work is exact: the steps from the checkpoint to the step the survivor reached (its `aborted` event,
  // written to its log and under the reason in its termination message), not to the operator's last reading.
  std::optional<int64_t> reached;
  std::istringstream logs(logs_of("gamma"));
  for (std::string line; std::getline(logs, line);) {
    const auto e = process::parse_event(line);
    if (const auto* aborted = e ? std::get_if<process::AbortedEvent>(&*e) : nullptr)
      reached = std::max(reached.value_or(0), aborted->step);
  }
  ASSERT_TRUE(reached) << logs_of("gamma");
  EXPECT_EQ(status["goodput"].value("lostSteps", int64_t{-1}), *reached - std::stoi(m[1])) << status.dump();
  // The event is recorded after the status write that carries the same news: wait for it.
  std::vector<std::string> resumes;
  EXPECT_TRUE(eventually([&] { return !(resumes = events_of("gamma", "ResumedFromStep")).empty(); }, 30s));
  ASSERT_EQ(resumes.size(), 1u);
  EXPECT_EQ(resumes[0], "attempt " + std::to_string(first_attempt + 1) + " resumed from step " + m[1].str() + " (" +
                            path + "): this job's own checkpoint");
  ASSERT_NO_FATAL_FAILURE(delete_job("gamma"));
}

// Run identity on a cluster: the checkpoints stay on a claim the user made (it outlives the jobs that mount it), but
// a new TrainingJob, even of the same name, is a new run (a new uid) and trains from step 0; with resumeFrom naming
// the old job's uid it starts from that run's checkpoint, and the status and an event say so.
TEST_F(TrainingE2E, ANewJobTrainsFromStepZeroUnlessResumeFromNamesAnotherRun) {
  // Far more epochs than the test waits for: each job is read while it trains, then deleted.
  auto yaml = [](const std::string& name, const std::string& resume_from) {
    std::string y = pod_job_yaml(name, {.epochs = 10000, .checkpoint_every_steps = 2, .checkpoint_on_claim = false});
    const std::string image = worker_image_line();
    y.replace(y.find(image), image.size(),
              image +
                  "    template:\n      spec:\n        containers: [{name: worker, volumeMounts: [{name: ckpt, "
                  "mountPath: /var/lib/torus/checkpoints}]}]\n"
                  "        volumes: [{name: ckpt, persistentVolumeClaim: {claimName: runs}}]\n");
    if (!resume_from.empty()) {
      const std::string every = "      everySteps: 2\n";
      y.replace(y.find(every), every.size(), every + "      resumeFrom: " + resume_from + "\n");
    }
    return y;
  };
  // Where an attempt started, once the operator read it.
  auto resumed_from = [](const std::string& job) {
    json r;
    EXPECT_TRUE(eventually(
        [&] {
          r = status_of(job).value("resumedFrom", json::object());
          return !r.value("time", "").empty();
        },
        120s))
        << status_of(job).dump() << "\n"
        << logs_of(job);
    return r;
  };
  const std::string claim = (dir_ / "runs-claim.yaml").string();
  std::ofstream(claim) << "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: runs}\n"
                          "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
  ASSERT_EQ(kubectl({"apply", "-f", claim}).code, 0);
  ASSERT_NO_FATAL_FAILURE(apply_yaml("kappa", yaml("kappa", "")));
  const std::string first = uid_of("kappa");
  ASSERT_TRUE(
      eventually([] { return status_of("kappa").value("lastCheckpoint", json::object()).value("step", 0) > 0; }, 120s))
      << status_of("kappa").dump() << "\n"
      << logs_of("kappa");
  EXPECT_EQ(
      status_of("kappa")["lastCheckpoint"].value("path", "").rfind("/var/lib/torus/checkpoints/" + first + "/", 0), 0u)
      << status_of("kappa").dump();
  ASSERT_NO_FATAL_FAILURE(delete_job("kappa"));

  // The same name again: a new uid, a new run, step 0; rank 0 names the old run's checkpoints.
  ASSERT_NO_FATAL_FAILURE(apply_yaml("kappa", yaml("kappa", "")));
  ASSERT_NE(uid_of("kappa"), first);
  const json fresh = resumed_from("kappa");
  EXPECT_EQ(fresh.value("step", -1), 0) << fresh.dump();
  EXPECT_EQ(fresh.value("reason", ""), "Fresh") << fresh.dump();
  const std::string again_logs = logs_of("kappa");
  EXPECT_NE(again_logs.find("run " + uid_of("kappa") + " starts from step 0"), std::string::npos) << again_logs;
  EXPECT_NE(again_logs.find("/var/lib/torus/checkpoints also holds checkpoints of run "), std::string::npos)
      << again_logs;
  ASSERT_NO_FATAL_FAILURE(delete_job("kappa"));

  // resumeFrom: the first job's run, by its uid.
  ASSERT_NO_FATAL_FAILURE(apply_yaml("lambda", yaml("lambda", first)));
  const json from = resumed_from("lambda");
  EXPECT_EQ(from.value("reason", ""), "ResumeFrom") << from.dump();
  EXPECT_EQ(from.value("run", ""), first) << from.dump();
  EXPECT_GT(from.value("step", 0), 0) << from.dump();
  const std::string path =
      "/var/lib/torus/checkpoints/" + first + "/ckpt-" + std::to_string(from.value("step", 0)) + ".torus";
  EXPECT_EQ(from.value("path", ""), path) << from.dump();
  std::vector<std::string> events;
  EXPECT_TRUE(eventually([&] { return !(events = events_of("lambda", "ResumedFromStep")).empty(); }, 30s));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "attempt 0 resumed from step " + std::to_string(from.value("step", 0)) + " (" + path +
                           "): run " + first + "'s checkpoint, as spec.training.checkpoint.resumeFrom asks");
  ASSERT_NO_FATAL_FAILURE(delete_job("lambda"));
  EXPECT_EQ(kubectl({"delete", "-f", claim}).code, 0);
}

// An edit of the seed on a running job: the job's checkpoints do not fit the new run (its data order and initial
// weights), so the next attempt is a new run from step 0 that says so, not an attempt that cannot restore.
TEST_F(TrainingE2E, ASeedEditStartsANewRunFromStepZero) {
  ASSERT_NO_FATAL_FAILURE(apply("mu", 2, 1, 10000));
  ASSERT_TRUE(
      eventually([] { return status_of("mu").value("lastCheckpoint", json::object()).value("step", 0) > 0; }, 120s))
      << status_of("mu").dump() << "\n"
      << logs_of("mu");
  const std::string uid = uid_of("mu");
  const CmdResult r =
      kubectl({"patch", "trainingjob", "mu", "--type=merge", "-p", R"({"spec":{"training":{"seed":7}}})"});
  ASSERT_EQ(r.code, 0) << r.out;
  json status;
  ASSERT_TRUE(eventually(
      [&] {
        status = status_of("mu");
        const json resumed = status.value("resumedFrom", json::object());
        return resumed.value("attempt", -1) == 1 && !resumed.value("time", "").empty();
      },
      120s))
      << status.dump() << "\n"
      << logs_of("mu");
  EXPECT_EQ(status.value("run", ""), uid + "-g2") << status.dump();
  EXPECT_EQ(status["resumedFrom"].value("reason", ""), "Fresh") << status.dump();
  EXPECT_EQ(status["resumedFrom"].value("step", -1), 0) << status.dump();
  EXPECT_EQ(status.value("phase", ""), "Running") << status.dump();
  std::vector<std::string> edits;
  EXPECT_TRUE(eventually([&] { return !(edits = events_of("mu", "SpecChanged")).empty(); }, 30s));
  ASSERT_FALSE(edits.empty());
  EXPECT_NE(edits[0].find("spec.training.seed: 0 -> 7; restarting the gang as attempt 1 as a new run " + uid +
                          "-g2 from step 0"),
            std::string::npos)
      << edits[0];
  // Its own checkpoints, in its own folder.
  EXPECT_TRUE(eventually(
      [&] {
        return status_of("mu")
                   .value("lastCheckpoint", json::object())
                   .value("path", "")
                   .rfind("/var/lib/torus/checkpoints/" + uid + "-g2/", 0) == 0;
      },
      120s))
      << status_of("mu").dump();
  EXPECT_NE(logs_of("mu").find("run " + uid + "-g2 starts from step 0"), std::string::npos) << logs_of("mu");
  ASSERT_NO_FATAL_FAILURE(delete_job("mu"));
}

// A checkpoint deleted behind the operator's back: the next attempt fails CheckpointLost instead of training again
// from step 0.
TEST_F(TrainingE2E, ACheckpointDeletedBehindTheOperatorsBackIsCheckpointLost) {
  // Far more epochs than the test waits for (80 train in ~4 s here): the workers must still be training when the
  // test kills them, on any machine.
  ASSERT_NO_FATAL_FAILURE(apply("eta", 2, 1, 10000));
  ASSERT_TRUE(
      eventually([] { return status_of("eta").value("lastCheckpoint", json::object()).value("step", 0) > 0; }, 120s))
      << status_of("eta").dump() << "\n"
      << logs_of("eta");
  // Both workers stop (no SIGTERM checkpoint, nothing written from here on), the claim loses its files, then both
  // die at once: the next attempt can only find the claim empty, however soon it starts.
  std::vector<pid_t> workers;
  for (const json& pod : pods_of("eta")) workers.push_back(worker_pid(pod));
  ASSERT_EQ(workers.size(), 2u);
  for (const pid_t pid : workers) ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  for (const pid_t pid : workers) ASSERT_TRUE(eventually([&] { return state_of(pid) == 'T'; }, 10s)) << pid;
  const fs::path claim = claim_folder("eta");
  ASSERT_FALSE(claim.empty());
  for (const auto& entry : fs::directory_iterator(claim)) fs::remove_all(entry.path());
  for (const pid_t pid : workers) ASSERT_EQ(::kill(pid, SIGKILL), 0);
  wait_phase("eta", "Failed", 120s);
  std::string reason;
  for (const json& c : status_of("eta").value("conditions", json::array())) {
    if (c.value("type", "") == "Failed") reason = c.value("reason", "") + ": " + c.value("message", "");
  }
  EXPECT_EQ(reason.rfind("CheckpointLost: ", 0), 0u) << status_of("eta").dump();
  const std::string logs = logs_of("eta");
  EXPECT_NE(logs.find("refusing to train again from step 0"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("resuming at step"), std::string::npos) << logs;
}

// The same job with its checkpoints on no volume would start again from step 0 after every restart on a cluster:
// it is refused before any pod is made, the field named.
TEST_F(TrainingE2E, ACheckpointDirOnNoVolumeIsRefusedBeforeAnyPod) {
  const std::string yaml =
      pod_job_yaml("zeta", {.epochs = 40, .checkpoint_every_steps = 2, .checkpoint_on_claim = false});
  const std::string file = (dir_ / "zeta.yaml").string();
  std::ofstream(file) << yaml;
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);
  wait_phase("zeta", "Failed", 60s);
  const json status = status_of("zeta");
  std::string message;
  for (const json& c : status.value("conditions", json::array())) {
    if (c.value("type", "") == "Failed") message = c.value("reason", "") + ": " + c.value("message", "");
  }
  EXPECT_NE(message.find("InvalidSpec: spec.training.checkpoint.dir: \"/var/lib/torus/checkpoints\" is on no volume"),
            std::string::npos)
      << status.dump();
  EXPECT_TRUE(pods_of("zeta").empty());
}

// Names resolve only through the headless Service that selects the worker pods (the stand-in's DNS is the cluster's,
// tests/apiserver/cluster_dns.h). A Service of the job's name that selects no worker (here made before the job, so
// the operator finds it there) leaves rank 1 unable to resolve rank 0's name: the rendezvous fails, named.
TEST_F(TrainingE2E, AServiceThatSelectsNoWorkerLeavesTheRanksUnableToResolveRankZero) {
  const std::string service = (dir_ / "theta-service.yaml").string();
  std::ofstream(service) << "apiVersion: v1\nkind: Service\nmetadata:\n  name: theta\nspec:\n  clusterIP: None\n"
                            "  publishNotReadyAddresses: true\n  selector: {torus.dev/job-name: someone-else}\n"
                            "  ports:\n  - {port: 29500}\n";
  ASSERT_EQ(kubectl({"apply", "-f", service}).code, 0);
  // A short rendezvous deadline in the pods (the default is two minutes).
  apply_failing_once("theta", job_yaml("theta", 2, 1, 4), "TORUS_RENDEZVOUS_TIMEOUT_MS", "5000");
  wait_phase("theta", "Failed", 120s);
  const std::string logs = logs_of("theta");
  EXPECT_NE(logs.find("resolve theta-worker-0.theta.default.svc:"), std::string::npos) << logs;
  EXPECT_NE(logs.find("Name or service not known"), std::string::npos) << logs;
  EXPECT_TRUE(started_ranks("theta", 2).empty()) << logs;
  EXPECT_EQ(kubectl({"delete", "-f", service}).code, 0);
}

// Issue 31.2 through the operator: a rank that stops (SIGSTOP, alive but silent) is named within the all-reduce's
// timeout by the rank that waited for it, in its termination message (the process kubelet gives each container its
// /dev/termination-log, as a kubelet does), and the job's condition quotes it: the rank, its pod and its node.
TEST_F(TrainingE2E, AStoppedRankIsNamedWithItsPodAndNodeInTheJobsCondition) {
  apply_failing_once("iota", job_yaml("iota", 2, 1, 40, "  allReduce:\n    timeoutSeconds: 3\n"),
                     "TORUS_TEST_SIGSTOP_AT_STEP", "1:3");
  // The node rank 1's pod runs on, read while it runs: once the job failed, the operator deletes the pods still
  // running (cleanPodPolicy Running), and the stopped rank 1's is one. It lives until rank 0's 3 s timeout at least.
  std::string node;
  ASSERT_TRUE(eventually(
      [&] {
        const auto pod = pod_named("iota", "iota-worker-1");
        node = pod ? (*pod)["spec"].value("nodeName", "") : "";
        return !node.empty();
      },
      60s))
      << status_of("iota").dump();
  wait_phase("iota", "Failed", 120s);
  std::string reason, message;
  for (const json& c : status_of("iota").value("conditions", json::array())) {
    if (c.value("type", "") == "Failed") reason = c.value("reason", ""), message = c.value("message", "");
  }
  EXPECT_EQ(reason, "CollectiveTimeout") << status_of("iota").dump();
  EXPECT_NE(message.find("ranks that never arrived: 1 (pod iota-worker-1, node " + node + ")"), std::string::npos)
      << message;
}

// Issue 17.1 with real workers: scaling a running gang 2 -> 4 is a new attempt (not a failure) whose four ranks
// mount the edited job file and resume from the checkpoint the two wrote.
TEST_F(TrainingE2E, ScalingARunningGangResumesFromItsCheckpointWithTheNewWorld) {
  // Far more epochs than the test waits for (40 train in ~2 s here): the edit must reach a gang that still trains,
  // and the four ranks must be seen running, on any machine. The test ends the job itself.
  ASSERT_NO_FATAL_FAILURE(apply("epsilon", 2, 1, 10000));
  ASSERT_TRUE(eventually([] { return logs_of("epsilon").find("checkpoint written") != std::string::npos; }, 120s))
      << logs_of("epsilon");
  ASSERT_EQ(
      kubectl({"patch", "trainingjob", "epsilon", "--type=merge", "-p", R"({"spec":{"gang":{"workers":4}}})"}).code, 0);
  ASSERT_TRUE(eventually([] { return all_running(pods_of("epsilon"), 4, 1); }, 60s))
      << status_of("epsilon").dump() << "\n"
      << logs_of("epsilon");
  // Each rank logs the step it resumed at before it announces its start.
  EXPECT_TRUE(eventually(
      [] {
        return started_ranks("epsilon", 4) == std::set<int>{0, 1, 2, 3};
      },
      120s))
      << logs_of("epsilon");
  wait_phase("epsilon", "Running");
  json status;
  EXPECT_TRUE(eventually(
      [&] {
        status = status_of("epsilon");
        return status.value("workers", json::object()).value("active", 0) == 4;
      },
      30s))
      << status.dump();
  EXPECT_EQ(status.value("attempt", -1), 1) << status.dump();
  EXPECT_EQ(status.value("restarts", -1), 0) << "an edit is not a failure: " << status.dump();
  std::string resumed;
  for (const json& pod : pods_of("epsilon")) {
    EXPECT_EQ(attempt_of(pod), 1);
    const json job_file = json::parse(read_file(pod_dir(pod) / "volumes" / "torus-job" / "job.json"), nullptr, false);
    EXPECT_EQ(job_file["spec"]["gang"].value("workers", 0), 4) << pod_dir(pod);
    resumed += read_file(pod_dir(pod) / "worker.log");
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(resumed, m, std::regex("resuming at step ([0-9]+)"))) << resumed;
  EXPECT_GT(std::stoi(m[1]), 0) << resumed;
  ASSERT_NO_FATAL_FAILURE(delete_job("epsilon"));
}

TEST_F(TrainingE2E, SuspendCheckpointsAndStopsAndResumeContinues) {
  // Far more epochs than the test waits for (40 train in ~2 s here): the suspension must reach a gang that still
  // trains, on any machine. The test ends the job itself.
  ASSERT_NO_FATAL_FAILURE(apply("delta", 2, 1, 10000));
  ASSERT_TRUE(eventually([] { return logs_of("delta").find("checkpoint written") != std::string::npos; }, 120s))
      << logs_of("delta");
  ASSERT_EQ(
      kubectl({"patch", "trainingjob", "delta", "--type=merge", "-p", R"({"spec":{"runPolicy":{"suspend":true}}})"})
          .code,
      0);
  wait_phase("delta", "Suspended");
  ASSERT_TRUE(eventually([] { return pods_of("delta").empty(); }, 60s));
  EXPECT_NE(logs_of("delta").find("stopped on request"), std::string::npos) << logs_of("delta");
  ASSERT_EQ(
      kubectl({"patch", "trainingjob", "delta", "--type=merge", "-p", R"({"spec":{"runPolicy":{"suspend":false}}})"})
          .code,
      0);
  // The next attempt's ranks resume from the checkpoint (each logs it before it announces its start) and train on.
  ASSERT_TRUE(eventually([] { return all_running(pods_of("delta"), 2, 1); }, 60s)) << status_of("delta").dump();
  EXPECT_TRUE(eventually([] { return started_ranks("delta", 2, 1) == std::set<int>{0, 1}; }, 120s)) << logs_of("delta");
  wait_phase("delta", "Running");
  std::string resumed;
  for (const json& pod : pods_of("delta")) resumed += read_file(pod_dir(pod) / "worker.log");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(resumed, m, std::regex("resuming at step ([0-9]+)"))) << resumed;
  EXPECT_GT(std::stoi(m[1]), 0) << resumed;
  ASSERT_NO_FATAL_FAILURE(delete_job("delta"));
}

}  // namespace
}  // namespace torus::controller::e2e

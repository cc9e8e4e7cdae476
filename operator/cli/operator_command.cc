#include "operator/cli/operator_command.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <optional>
#include <thread>

#include "common/launch/exit_codes.h"
#include "common/log/log.h"
#include "common/metrics/http_exporter.h"
#include "common/metrics/operator_metrics.h"
#include "common/util/error.h"
#include "common/util/random.h"
#include "operator/cli/operator_flags.h"
#include "operator/controller/controller.h"
#include "operator/kube/config.h"
#include "operator/kube/leader_election.h"

namespace torus::cli {

const std::string_view kOperatorSummary = "run the TrainingJob operator against a Kubernetes API server";
const std::string_view kOperatorUsage =
    "usage: torus operator [--kubeconfig FILE] [--namespace NS[,NS...]]... [--leader-elect]\n"
    "                      [--metrics-addr HOST:PORT] [--qps Q] [--burst B] [--workers N]\n"
    "                      [--progress-interval S]\n"
    "                      [--lease-namespace NS] [--id NAME]\n"
    "\n"
    "Watches TrainingJobs and runs each as a gang of worker pods (docs/operator.md).\n"
    "\n"
    "  --kubeconfig FILE     kubeconfig to use (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
    "  --namespace NS[,NS]   watch only these namespaces: a comma-separated list, and/or the flag repeated\n"
    "                        (--namespace a,b or --namespace a --namespace b); default: all namespaces\n"
    "  --leader-elect        act only while holding the Lease torus-operator (for several replicas)\n"
    "  --lease-namespace NS  namespace of the Lease (default: the first --namespace, the pod's, or 'default')\n"
    "  --id NAME             this replica's identity in the Lease (default: $POD_NAME or host name + random)\n"
    "  --metrics-addr ADDR   serve /metrics, /healthz, /readyz here (default :8080; port 0 picks one)\n"
    "  --qps Q --burst B     client-side rate limit for API requests (default 0: none, the server's Priority\n"
    "                        and Fairness protects it; kube-controller-manager's is 20 / 30)\n"
    "  --workers N           jobs reconciled in parallel (default 4)\n"
    "  --progress-interval S read a Running job's progress from rank 0's /metrics every S seconds (default 15)\n"
    "  --worker-image IMAGE  image for jobs whose spec.gang.image is empty\n"
    "  --lease-duration S --renew-deadline S --retry-period S\n"
    "                        leader election timing in seconds (default 15 / 10 / 2)\n"
    "Flags also take the form --flag=value; --metrics-address, --leader-election-namespace and\n"
    "--watch-namespace (same list forms) are aliases of --metrics-addr, --lease-namespace and --namespace.\n";

namespace {

metrics::HttpExporterOptions listen_address(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) throw InvalidArgument("--metrics-addr: expected HOST:PORT, got '" + addr + "'");
  metrics::HttpExporterOptions o;
  o.host = colon == 0 ? "0.0.0.0" : addr.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(addr.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    throw InvalidArgument("--metrics-addr: port must be 0-65535, got '" + addr.substr(colon + 1) + "'");
  }
  o.port = static_cast<uint16_t>(port);
  return o;
}

std::string default_identity() {
  if (const char* pod = std::getenv("POD_NAME"); pod && *pod) return pod;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "-" + random_hex(4);
}

// SIGINT and SIGTERM ask for a graceful stop; SIGUSR1 only wakes the waiter thread at destruction.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

// The signals are blocked in every thread (block_signals() runs before any thread starts) and taken here by one
// waiter thread, which calls `on_signal`.
class SignalWaiter {
 public:
  static void block_signals() {
    sigset_t set = shutdown_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }
  explicit SignalWaiter(std::function<void()> on_signal) {
    thread_ = std::thread([cb = std::move(on_signal)] {
      sigset_t set = shutdown_signals();
      int sig = 0;
      sigwait(&set, &sig);
      if (sig == SIGUSR1) return;
      TLOG(Info) << "operator: signal " << sig << ", shutting down";
      cb();
    });
  }
  ~SignalWaiter() {
    pthread_kill(thread_.native_handle(), SIGUSR1);  // harmless if the thread already returned and was reaped
    thread_.join();
  }
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

 private:
  std::thread thread_;
};

}  // namespace

int operator_command(const std::vector<std::string>& args) {
  const OperatorFlags flags = parse_operator_flags(args);
  SignalWaiter::block_signals();  // before any thread exists, so that every thread inherits the mask
  log::set_tag("operator");
  kube::ClusterConfig cluster = kube::load_default(flags.kubeconfig);
  metrics::Registry registry;
  metrics::OperatorMetrics op_metrics(registry, "0.1.0");
  kube::ClientOptions client_options;
  client_options.qps = flags.qps;
  client_options.burst = flags.burst;
  client_options.on_request = [&](const std::string& verb, int code) { op_metrics.record_api_request(verb, code); };
  kube::Client client(cluster, client_options);

  kube::LeaderElectionOptions lease = flags.lease;
  lease.namespace_ = lease_namespace_of(flags, cluster.namespace_);
  lease.identity = flags.identity.empty() ? default_identity() : flags.identity;
  kube::LeaderElector elector(client, lease);
  controller::ControllerOptions controller_options;
  controller_options.namespaces = flags.namespaces;
  controller_options.workers = flags.workers;
  controller_options.default_worker_image = flags.worker_image;
  controller_options.progress_interval = flags.progress_interval;
  controller::Controller ctl(client, controller_options, &op_metrics);

  std::mutex mu;
  std::condition_variable cv;
  enum class Run { kRunning, kStopping } run = Run::kRunning;
  auto request_stop = [&] {
    {
      std::lock_guard lock(mu);
      run = Run::kStopping;
    }
    cv.notify_all();
    elector.stop();
  };
  SignalWaiter signals(request_stop);

  metrics::HttpExporter exporter(registry, listen_address(flags.metrics_addr));
  // Ready: the caches are synced (leader), or this replica is a healthy standby.
  exporter.add_handler("/readyz", [&] {
    bool ready = ctl.synced() || (flags.leader_elect == OperatorFlags::LeaderElect::kOn && !elector.is_leader());
    return metrics::HttpResponse{ready ? 200 : 503, "text/plain; charset=utf-8", ready ? "ok\n" : "syncing\n"};
  });
  std::printf("torus operator: metrics on http://%s:%u/metrics, identity %s\n",
              listen_address(flags.metrics_addr).host.c_str(), exporter.port(), elector.identity().c_str());
  std::fflush(stdout);

  int exit_code = to_int(launch::ExitCode::kSuccess);
  if (flags.leader_elect == OperatorFlags::LeaderElect::kOn) {
    if (elector.acquire()) {
      op_metrics.leader.set(1);
      if (!ctl.start(std::chrono::minutes(2))) throw Timeout("operator: informer caches did not sync within 2 min");
      if (!elector.keep_renewing()) exit_code = to_int(launch::ExitCode::kFailure);  // lost it: stop acting at once
      ctl.stop();
      op_metrics.leader.set(0);
      elector.release();
    }
  } else {
    if (!ctl.start(std::chrono::minutes(2))) throw Timeout("operator: informer caches did not sync within 2 min");
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return run == Run::kStopping; });
    ctl.stop();
  }
  TLOG(Info) << "operator: stopped";
  return exit_code;
}

}  // namespace torus::cli

#include "tests/apiserver/process_kubelet.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>

#include "common/log/log.h"
#include "common/process/supervisor.h"
#include "common/util/error.h"

namespace torus::standin {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a pod that waits for a volume is looked at again.
constexpr milliseconds kRetry{100};
// How often the running pods' /etc/hosts are brought up to date: the cluster DNS's answers follow the Services and
// pods within this (CoreDNS follows EndpointSlices within about a second).
constexpr milliseconds kDnsRefresh{250};

std::string key_of(const std::string& ns, const std::string& name) { return ns + "/" + name; }

// A container status's imageID, as containerd reports it: the repository and the manifest's digest.
std::string image_id(const Image& image) {
  std::string repository = image.reference.substr(0, image.reference.find('@'));
  if (const auto colon = repository.rfind(':');
      colon != std::string::npos && repository.find('/', colon) == std::string::npos)
    repository.resize(colon);
  return repository + "@" + image.manifest_digest;
}

}  // namespace

struct ProcessKubelet::Impl {
  struct Proc {
    std::string ns, pod, container;
    std::unique_ptr<std::ofstream> log;
  };
  struct StopRequest {
    std::string key;
    std::chrono::seconds grace;
  };
  struct Restart {
    std::string ns, pod, container;
    Clock::time_point at;
  };

  Impl(const Store& s, SandboxOptions o, ExitHandler h, ProgressHandler p)
      : store(s),
        options(std::move(o)),
        on_exit(std::move(h)),
        on_progress(std::move(p)),
        image_store(options.root),
        image_manager(image_store, options.pull_backoff) {
    if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("process kubelet: pipe");
    sup.set_wakeup_fd(wake_pipe[0]);
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    stopping = true;
    wake();
    if (thread.joinable()) thread.join();
    ::close(wake_pipe[0]);
    ::close(wake_pipe[1]);
  }

  void wake() { (void)!::write(wake_pipe[1], "x", 1); }

  void drain_wakeups() {
    char buf[64];
    while (::read(wake_pipe[0], buf, sizeof(buf)) > 0) {
    }
  }

  // ---- the thread ------------------------------------------------------------------------------------------

  void loop() {
    while (!stopping) {
      drain_wakeups();
      const bool waiting = start_pending();
      handle_stops();
      kill_overdue();
      refresh_dns();
      milliseconds timeout = std::min(waiting ? kRetry : milliseconds(1000), start_due_restarts());
      if (!started_pods.empty()) timeout = std::min(timeout, kDnsRefresh);
      if (!kill_at.empty()) {
        timeout = std::min(timeout, std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                                                  kill_at.begin()->second - Clock::now())));
      }
      // Terminations already reaped come first (one poll can reap several children).
      if (auto t = sup.wait_any(sup.running() == 0 ? milliseconds(0) : timeout)) {
        ended(*t);
        continue;
      }
      if (sup.running() == 0) {
        pollfd pfd{wake_pipe[0], POLLIN, 0};
        ::poll(&pfd, 1, static_cast<int>(timeout.count()));
      }
    }
  }

  // Starts the pods whose volumes and names are there; true when some still wait.
  bool start_pending() {
    std::vector<json> pods;
    {
      std::lock_guard lock(mu);
      pods.swap(pending);
      for (const json& pod : pods) in_hand.insert(key_of(namespace_of(pod), name_of(pod)));
    }
    std::vector<json> still;
    for (json& pod : pods) {
      const std::string key = key_of(namespace_of(pod), name_of(pod));
      try {
        PodImages images;
        std::optional<Waiting> waiting = pull_images(pod, images);
        if (!waiting) {
          auto prepared = prepare_pod(store, pod, options, images);
          if (auto* w = std::get_if<Waiting>(&prepared)) {
            waiting = *w;
          } else {
            start(pod, std::get<PodLaunch>(prepared), images);
            continue;
          }
        }
        TLOG(Debug) << "process kubelet: " << key << " waits: " << waiting->reason << ": " << waiting->message;
        report_waiting(pod, *waiting);
        still.push_back(std::move(pod));
      } catch (const Error& e) {
        cannot_run(pod, e.what());
      }
    }
    std::lock_guard lock(mu);
    in_hand.clear();
    for (json& pod : still) {
      if (!cancelled.erase(key_of(namespace_of(pod), name_of(pod)))) pending.push_back(std::move(pod));
    }
    return !pending.empty();
  }

  // The images of the pod's containers that run from one (those the test did not map to a host program), pulled
  // as their policies say; the first container that must wait, if any.
  std::optional<Waiting> pull_images(const json& pod, PodImages& images) {
    const std::string node = pod["spec"].value("nodeName", "");
    const std::string uid = pod["metadata"].value("uid", "");
    for (const json& c : pod["spec"].value("containers", json::array())) {
      if (runs_on_host(c)) continue;
      const std::string image = c.value("image", "");
      auto ready = image_manager.ensure(node, uid, image, pull_policy(image, c.value("imagePullPolicy", "")));
      if (auto* w = std::get_if<ImageWaiting>(&ready)) return Waiting{w->message, w->reason, c.value("name", "")};
      images.emplace(c.value("name", ""), std::get<ImageReady>(ready));
    }
    return std::nullopt;
  }

  // A container the test maps to a host program: by its command (SandboxOptions::commands) or, without one, by its
  // image's repository (SandboxOptions::images).
  bool runs_on_host(const json& c) const {
    const json command = c.value("command", json::array());
    if (!command.empty()) return options.commands.count(command[0].get<std::string>()) > 0;
    std::string image = c.value("image", "");
    if (const auto at = image.find('@'); at != std::string::npos) image.resize(at);
    if (const auto colon = image.rfind(':'); colon != std::string::npos && image.find('/', colon) == std::string::npos)
      image.resize(colon);
    return options.images.count(image) > 0;
  }

  // Tells the kubelet what the pod waits for, once per change (a pod retried every 100 ms writes nothing new).
  void report_waiting(const json& pod, const Waiting& w) {
    const std::string key = key_of(namespace_of(pod), name_of(pod));
    const std::string said = w.container + "\n" + w.reason + "\n" + w.message;
    if (last_waiting[key] == said) return;
    last_waiting[key] = said;
    on_progress(Progress{namespace_of(pod), name_of(pod), w, {}});
  }

  void start(const json& pod, const PodLaunch& launch, const PodImages& images) {
    const std::string ns = namespace_of(pod);
    const std::string name = name_of(pod);
    const std::string key = key_of(ns, name);
    {
      std::lock_guard lock(mu);
      if (cancelled.erase(key)) return;  // deleted while it waited
      running[key] += static_cast<int>(launch.containers.size());
    }
    last_waiting.erase(key);
    started_pods[key] = {pod, launch.dir, ""};
    Progress started{ns, name, std::nullopt, {}};
    for (const ContainerLaunch& c : launch.containers) {
      launches[key + "/" + c.name] = {launch.dir, c};
      start_container(ns, name, launch.dir, c);
      const auto image = images.find(c.name);
      started.image_ids[c.name] = image == images.end() ? "" : image_id(image->second.image);
    }
    on_progress(started);
  }

  void start_container(const std::string& ns, const std::string& name, const std::filesystem::path& dir,
                       const ContainerLaunch& c) {
    const std::string key = key_of(ns, name);
    auto log = std::make_unique<std::ofstream>(dir / (c.name + ".log"), std::ios::app);
    std::ofstream(c.termination_log, std::ios::trunc);  // each run of the container has last words of its own
    const size_t index = sup.start({key + "/" + c.name, c.argv, c.env, c.environment});
    if (procs.size() <= index) procs.resize(index + 1);
    procs[index] = Proc{ns, name, c.name, std::move(log)};
    std::ofstream(dir / (c.name + ".pid")) << sup.pid(index) << "\n";
    TLOG(Info) << "process kubelet: " << key << " container " << c.name << " started as pid " << sup.pid(index);
  }

  // Starts the restarts that are due; returns how long until the next one (1 s when none waits).
  milliseconds start_due_restarts() {
    std::vector<Restart> due;
    milliseconds next(1000);
    {
      std::lock_guard lock(mu);
      const auto now = Clock::now();
      for (auto it = restarts.begin(); it != restarts.end();) {
        if (it->at <= now) {
          due.push_back(*it);
          it = restarts.erase(it);
        } else {
          next = std::min(next, std::chrono::duration_cast<milliseconds>(it->at - now) + milliseconds(1));
          ++it;
        }
      }
      for (const Restart& r : due) ++running[key_of(r.ns, r.pod)];
    }
    for (const Restart& r : due) {
      auto launch = launches.find(key_of(r.ns, r.pod) + "/" + r.container);
      if (launch != launches.end()) start_container(r.ns, r.pod, launch->second.first, launch->second.second);
    }
    return next;
  }

  // The running pods' name-service files, from the records the cluster's DNS serves now.
  void refresh_dns() {
    std::vector<std::string> live;
    {
      std::lock_guard lock(mu);
      for (auto it = started_pods.begin(); it != started_pods.end();) {
        if (running.count(it->first) || restart_pending(it->first)) {
          live.push_back(it->first);
          ++it;
        } else {
          it = started_pods.erase(it);
        }
      }
    }
    if (live.empty()) return;
    const std::vector<DnsRecord> records = cluster_dns_records(store);
    for (const std::string& key : live) {
      StartedPod& started = started_pods.at(key);
      std::string hosts = hosts_file(records, started.pod);
      if (hosts == started.hosts) continue;
      try {
        write_pod_hosts(started.dir, hosts);
        started.hosts = std::move(hosts);
        TLOG(Debug) << "process kubelet: " << key << ": /etc/hosts updated";
      } catch (const std::exception& e) {
        TLOG(Warn) << "process kubelet: " << key << ": cannot write its /etc/hosts: " << e.what();
      }
    }
  }

  bool restart_pending(const std::string& key) const {
    return std::any_of(restarts.begin(), restarts.end(), [&](const Restart& r) { return key_of(r.ns, r.pod) == key; });
  }

  void cannot_run(const json& pod, const std::string& why) {
    TLOG(Warn) << "process kubelet: " << key_of(namespace_of(pod), name_of(pod)) << ": " << why;
    const json containers = pod["spec"].value("containers", json::array());
    for (size_t i = 0; i < containers.size(); ++i) {
      const auto state = i + 1 == containers.size() ? Exit::Pod::kAllEnded : Exit::Pod::kContainersLeft;
      on_exit(Exit{namespace_of(pod), name_of(pod), containers[i].value("name", ""), 128, "ContainerCannotRun", state});
    }
  }

  void handle_stops() {
    std::vector<StopRequest> requests;
    {
      std::lock_guard lock(mu);
      requests.swap(stops);
    }
    for (const StopRequest& r : requests) {
      const Clock::time_point due = Clock::now() + r.grace;
      if (auto due_now = kill_at.find(r.key); due_now != kill_at.end()) {
        due_now->second = std::min(due_now->second, due);  // a shorter grace (a repeated delete) brings it forward
        continue;
      }
      signal_pod(r.key, SIGTERM);
      kill_at[r.key] = due;
    }
  }

  void kill_overdue() {
    for (auto it = kill_at.begin(); it != kill_at.end();) {
      if (Clock::now() < it->second) {
        ++it;
        continue;
      }
      signal_pod(it->first, SIGKILL);
      it = kill_at.erase(it);
    }
  }

  void signal_pod(const std::string& key, int signo) {
    for (size_t i = 0; i < procs.size(); ++i) {
      if (procs[i].log && key_of(procs[i].ns, procs[i].pod) == key) sup.signal(i, signo);
    }
  }

  void ended(const process::Termination& t) {
    Proc& p = procs.at(t.index);
    const std::string key = key_of(p.ns, p.pod);
    Exit exit{p.ns, p.pod, p.container, t.shell_code(), t.success() ? "Completed" : "Error", Exit::Pod::kAllEnded};
    p.log.reset();
    if (auto launch = launches.find(key + "/" + p.container); launch != launches.end()) {
      const auto& [dir, c] = launch->second;
      exit.message = termination_message(c, dir / (c.name + ".log"), exit.exit_code);
    }
    {
      std::lock_guard lock(mu);
      if (--running[key] > 0) {
        exit.pod_state = Exit::Pod::kContainersLeft;
      } else {
        running.erase(key);
      }
    }
    if (exit.pod_state == Exit::Pod::kAllEnded) kill_at.erase(key);
    TLOG(Info) << "process kubelet: " << key << " container " << p.container << " " << t.describe();
    on_exit(exit);
  }

  void on_line(size_t index, std::string_view line) {
    if (index >= procs.size() || !procs[index].log) return;
    *procs[index].log << line << '\n';
    procs[index].log->flush();
  }

  const Store& store;
  SandboxOptions options;
  ExitHandler on_exit;
  ProgressHandler on_progress;
  ImageStore image_store;
  ImageManager image_manager;
  int wake_pipe[2] = {-1, -1};
  std::atomic<bool> stopping{false};

  std::mutex mu;                       // guards pending, stops, running, cancelled
  std::vector<json> pending;           // pods to start
  std::vector<StopRequest> stops;      // pods to stop
  std::map<std::string, int> running;  // pod key -> containers running
  std::set<std::string> cancelled;     // deleted while waiting to start
  std::set<std::string> in_hand;       // taken from pending by the thread, not yet started or put back
  std::vector<Restart> restarts;       // containers to start again, when due

  // The thread's own.
  std::vector<Proc> procs;  // by supervisor index
  // "ns/pod/container" -> its pod's folder and its launch, for a restart.
  std::map<std::string, std::pair<std::filesystem::path, ContainerLaunch>> launches;
  std::map<std::string, Clock::time_point> kill_at;
  // Pods whose containers were started: whose /etc/hosts the kubelet keeps.
  struct StartedPod {
    json pod;  // as started
    std::filesystem::path dir;
    std::string hosts;  // its /etc/hosts as last written here ("": as prepare_pod wrote it)
  };
  std::map<std::string, StartedPod> started_pods;
  std::map<std::string, std::string> last_waiting;  // pod key -> what report_waiting last said
  process::Supervisor sup{[this](size_t i, process::Stream, std::string_view line) { on_line(i, line); }};
  std::thread thread;
};

ProcessKubelet::ProcessKubelet(const Store& store, SandboxOptions options, ExitHandler on_exit,
                               ProgressHandler on_progress)
    : impl_(std::make_unique<Impl>(store, std::move(options), std::move(on_exit), std::move(on_progress))) {}

ImageStore& ProcessKubelet::images() { return impl_->image_store; }

ProcessKubelet::~ProcessKubelet() = default;

void ProcessKubelet::run(const json& pod) {
  const std::string key = key_of(namespace_of(pod), name_of(pod));
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->running.count(key) || impl_->in_hand.count(key)) return;
    for (const json& p : impl_->pending) {
      if (key_of(namespace_of(p), name_of(p)) == key) return;
    }
    impl_->cancelled.erase(key);
    impl_->pending.push_back(pod);
  }
  impl_->wake();
}

void ProcessKubelet::restart(const std::string& ns, const std::string& name, const std::string& container,
                             std::chrono::milliseconds delay) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->restarts.push_back({ns, name, container, Clock::now() + delay});
  }
  impl_->wake();
}

bool ProcessKubelet::stop(const std::string& ns, const std::string& name, std::chrono::seconds grace) {
  const std::string key = key_of(ns, name);
  {
    std::lock_guard lock(impl_->mu);
    std::erase_if(impl_->restarts, [&](const Impl::Restart& r) { return key_of(r.ns, r.pod) == key; });
    for (auto it = impl_->pending.begin(); it != impl_->pending.end(); ++it) {
      if (key_of(namespace_of(*it), name_of(*it)) == key) {
        impl_->pending.erase(it);
        return false;
      }
    }
    if (!impl_->running.count(key)) {
      impl_->cancelled.insert(key);  // it may be in the thread's hands right now, about to start
      return false;
    }
    impl_->stops.push_back({key, grace});
  }
  impl_->wake();
  return true;
}

}  // namespace torus::standin

// operator_scale_driver: the measuring half of bench/operator_scale.sh. Creates N TrainingJobs at once against
// a running kube-standin + `torus operator`, watches pods and jobs through informers, and reports per-job time from
// creation until all of its pods exist and until its status says Running, the operator's API requests per job from
// creation to Running (the stand-in's own count, minus the driver's; by resource and verb too), and the stand-in's
// raw request capacity.
//
//   operator_scale_driver --kubeconfig K --jobs 200 --workers 8 [--capacity-seconds 3] [--timeout 300]
//                         [--checkpoints claim|none]
// The jobs keep checkpoints as users' jobs do (docs/trainingjob.md): on a claim of their own
// (checkpoint.volumeClaimTemplate, restartPolicy ExitCode; the default), or none at all (restartPolicy Never). A job
// whose status says Failed ends the run at once, its reason and message quoted: a refused job never gets its pods, and
// waiting out --timeout for it would only hide why.
// Prints one `key=value` line per figure and `DRIVER ...` last.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "operator/controller/labels.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/informer.h"

namespace {

using namespace torus;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace res = kube::resources;

// Where the jobs keep their checkpoints.
enum class Checkpoints { kClaim, kNone };

struct Flags {
  std::string kubeconfig;
  Checkpoints checkpoints = Checkpoints::kClaim;
  int jobs = 200;
  int workers = 8;
  int capacity_seconds = 3;
  int timeout_seconds = 300;
  std::string ns = "default";
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) throw InvalidArgument(a + ": expected a value");
    std::string v = argv[++i];
    if (a == "--kubeconfig") {
      f.kubeconfig = v;
    } else if (a == "--jobs") {
      f.jobs = std::stoi(v);
    } else if (a == "--workers") {
      f.workers = std::stoi(v);
    } else if (a == "--capacity-seconds") {
      f.capacity_seconds = std::stoi(v);
    } else if (a == "--timeout") {
      f.timeout_seconds = std::stoi(v);
    } else if (a == "--namespace") {
      f.ns = v;
    } else if (a == "--checkpoints") {
      if (v != "claim" && v != "none") throw InvalidArgument("--checkpoints: expected claim or none, got '" + v + "'");
      f.checkpoints = v == "claim" ? Checkpoints::kClaim : Checkpoints::kNone;
    } else {
      throw InvalidArgument("unknown flag " + a);
    }
  }
  if (f.kubeconfig.empty()) throw InvalidArgument("--kubeconfig: required");
  return f;
}

json job(const std::string& name, int workers, Checkpoints checkpoints) {
  json training = {{"epochs", 1}, {"batchSize", 64 * workers}, {"lrSchedule", {{"type", "one-cycle"}, {"peak", 0.1}}}};
  std::string restart = "Never";
  if (checkpoints == Checkpoints::kClaim) {
    // As examples/fashion-mnist.yaml: the operator makes the claim `<job>-checkpoint` and mounts it on worker 0.
    training["checkpoint"] = {{"dir", "/ckpt"},
                              {"volumeClaimTemplate", {{"spec", {{"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}}};
    restart = "ExitCode";
  }
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"gang", {{"workers", workers}, {"device", "cpu"}}},
            {"model", {{"arch", "resnet9"}}},
            {"data", {{"dataset", "synthetic"}}},
            {"training", training},
            {"runPolicy", {{"restartPolicy", restart}}}}}};
}

// "scale-3: InvalidSpec: spec.training...": the job's Failed condition, if it has one that is True.
std::optional<std::string> failure_of(const json& job) {
  for (const json& c : job.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Failed" && c.value("status", "") == "True") {
      return job["metadata"].value("name", "") + ": " + c.value("reason", "") + ": " + c.value("message", "");
    }
  }
  return std::nullopt;
}

json standin_stats(const kube::ClusterConfig& cfg) {
  auto t = kube::make_http_transport(cfg, {});
  kube::HttpResponse r = t->send({"GET", "/_standin/stats", "", "application/json", {}});
  return json::parse(r.body);
}

// "resource verb=N/job ..." for what changed between two stats reads.
std::string per_job_breakdown(const json& before, const json& after, int jobs) {
  std::string out;
  const json b = before.value("byResource", json::object());
  const json a = after.value("byResource", json::object());
  for (const auto& [resource, verbs] : a.items()) {
    for (const auto& [verb, n] : verbs.items()) {
      int64_t was = b.value(resource, json::object()).value(verb, int64_t{0});
      double per = static_cast<double>(n.get<int64_t>() - was) / jobs;
      if (per < 0.05) continue;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s%s.%s=%.2f", out.empty() ? "" : " ", resource.c_str(), verb.c_str(), per);
      out += buf;
    }
  }
  return out;
}

// Requests per second the stand-in answers for cheap GETs from 8 client threads (its own ceiling).
double standin_capacity(const kube::ClusterConfig& cfg, int seconds) {
  std::atomic<int64_t> done{0};
  auto until = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto transport = kube::make_http_transport(cfg, {});
      while (Clock::now() < until) {
        transport->send({"GET", "/api/v1/namespaces/default/configmaps?limit=1", "", "application/json", {}});
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  return static_cast<double>(done.load()) / seconds;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

int run(int argc, char** argv) {
  Flags f = parse(argc, argv);
  kube::ClusterConfig cfg = kube::load_kubeconfig(f.kubeconfig);
  kube::Client client(cfg, kube::ClientOptions{.qps = 1e6, .burst = 1000000});

  std::mutex mu;
  std::map<std::string, Clock::time_point> created;   // job -> when its create returned
  std::map<std::string, Clock::time_point> complete;  // job -> when its last pod appeared
  std::map<std::string, std::set<std::string>> pods;  // job -> pod names seen
  std::map<std::string, Clock::time_point> running;   // job -> when its status first said Running
  auto on_pod = [&](const json& pod) {
    std::string j = pod["metadata"].value("labels", json::object()).value(std::string(controller::kLabelJobName), "");
    std::lock_guard lock(mu);
    auto& names = pods[j];
    names.insert(pod["metadata"].value("name", ""));
    if (static_cast<int>(names.size()) == f.workers && !complete.count(j)) complete[j] = Clock::now();
  };
  kube::Informer informer(client, res::kPods, {f.ns, controller::owned_selector()},
                          {on_pod, [&](const json&, const json& p) { on_pod(p); }, nullptr});
  std::optional<std::string> failed;  // the first job that failed, with its condition's reason and message
  auto on_job = [&](const json& j) {
    if (auto why = failure_of(j)) {
      std::lock_guard lock(mu);
      if (!failed) failed = std::move(why);
      return;
    }
    if (j.value("status", json::object()).value("phase", "") != "Running") return;
    std::lock_guard lock(mu);
    running.try_emplace(j["metadata"].value("name", ""), Clock::now());
  };
  kube::Informer jobs_informer(client, res::kTrainingJobs, {f.ns, ""},
                               {on_job, [&](const json&, const json& j) { on_job(j); }, nullptr});
  informer.start();
  jobs_informer.start();
  if (!informer.wait_synced(std::chrono::seconds(30)) || !jobs_informer.wait_synced(std::chrono::seconds(30)))
    throw Timeout("pod or job informer did not sync");

  const json stats_before = standin_stats(cfg);
  int64_t before = stats_before.value("total", int64_t{0});
  uint64_t driver_before = client.requests_sent();
  auto t0 = Clock::now();
  // Created "at once": 16 threads, each creating its share back to back.
  std::vector<std::thread> creators;
  for (int t = 0; t < 16; ++t) {
    creators.emplace_back([&, t] {
      for (int i = t; i < f.jobs; i += 16) {
        std::string name = "scale-" + std::to_string(i);
        client.create(res::kTrainingJobs, f.ns, job(name, f.workers, f.checkpoints));
        std::lock_guard lock(mu);
        created[name] = Clock::now();
      }
    });
  }
  for (auto& t : creators) t.join();
  auto deadline = t0 + std::chrono::seconds(f.timeout_seconds);
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (failed) throw Error("job " + *failed);
      if (static_cast<int>(complete.size()) >= f.jobs && static_cast<int>(running.size()) >= f.jobs) break;
    }
    if (Clock::now() > deadline) {
      std::lock_guard lock(mu);
      throw Timeout("within --timeout " + std::to_string(f.timeout_seconds) + " s, " + std::to_string(complete.size()) +
                    " of " + std::to_string(f.jobs) + " jobs got all their pods and " +
                    std::to_string(running.size()) + " were Running");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  informer.stop();
  jobs_informer.stop();
  const json stats_after = standin_stats(cfg);
  int64_t after = stats_after.value("total", int64_t{0});
  // The driver's own traffic (creates, the informer's list/watch, these stats calls) is not the operator's.
  int64_t driver = static_cast<int64_t>(client.requests_sent() - driver_before) + 2;

  std::vector<double> latencies, to_running;
  Clock::time_point t_end = t0;
  for (const auto& [name, c] : created) {
    latencies.push_back(std::chrono::duration<double>(complete[name] - c).count());
    to_running.push_back(std::chrono::duration<double>(running[name] - c).count());
    t_end = std::max(t_end, complete[name]);
  }
  double wall = std::chrono::duration<double>(t_end - t0).count();  // until every pod exists
  double per_job = static_cast<double>(after - before - driver) / f.jobs;
  double capacity = standin_capacity(cfg, f.capacity_seconds);
  std::printf("jobs=%d workers=%d wall_seconds=%.3f\n", f.jobs, f.workers, wall);
  std::printf("p50_seconds=%.3f p99_seconds=%.3f max_seconds=%.3f\n", percentile(latencies, 0.5),
              percentile(latencies, 0.99), percentile(latencies, 1.0));
  std::printf("running_p50_seconds=%.3f running_p99_seconds=%.3f\n", percentile(to_running, 0.5),
              percentile(to_running, 0.99));
  std::printf("operator_requests=%lld requests_per_job=%.1f (creation to Running)\n",
              static_cast<long long>(after - before - driver), per_job);
  std::printf("per_job (driver's creates and stats reads included): %s\n",
              per_job_breakdown(stats_before, stats_after, f.jobs).c_str());
  std::printf("standin_capacity_rps=%.0f\n", capacity);
  std::printf(
      "DRIVER jobs_per_second=%.2f p99_seconds=%.3f running_p99_seconds=%.3f requests_per_job=%.1f "
      "standin_rps=%.0f\n",
      f.jobs / wall, percentile(latencies, 0.99), percentile(to_running, 0.99), per_job, capacity);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("operator_scale_driver", [&] { return run(argc, argv); });
}

#include "operator/controller/progress_poller.h"

#include <algorithm>
#include <future>

#include "common/api/defaults.h"
#include "common/log/log.h"
#include "operator/controller/progress.h"
#include "operator/controller/time_util.h"
#include "operator/kube/client.h"

namespace torus::controller {

using json = nlohmann::json;

ProgressPoller::ProgressPoller(std::chrono::seconds interval, std::chrono::milliseconds timeout)
    : interval_(std::max(interval, std::chrono::seconds(1))), timeout_(timeout) {}

std::optional<RankZeroReading> ProgressPoller::poll(const std::string& key, const json& job, const json* rank0) {
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    auto it = last_read_.find(key);
    if (it != last_read_.end() && now - it->second < interval_) return std::nullopt;
    last_read_[key] = now;
  }
  if (!rank0) return std::nullopt;
  const auto status = rank0->find("status");
  const std::string ip = status != rank0->end() && status->is_object() ? status->value("podIP", "") : "";
  if (ip.empty()) return std::nullopt;
  return read(key, job, ip);
}

std::chrono::seconds ProgressPoller::next_in(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = last_read_.find(key);
  if (it == last_read_.end()) return std::chrono::seconds(1);
  const auto left = it->second + interval_ - std::chrono::steady_clock::now();
  return std::max(std::chrono::ceil<std::chrono::seconds>(left), std::chrono::seconds(1));
}

void ProgressPoller::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  last_read_.erase(key);
}

std::optional<RankZeroReading> ProgressPoller::read(const std::string& key, const json& job,
                                                    const std::string& ip) const {
  const json spec = job.value("spec", json::object());
  const int port = spec.value("metricsPort", api::kDefaultMetricsPort);
  const json gang = spec.value("gang", json::object());
  const int world = gang.value("workers", 1) * gang.value("processesPerWorker", 1);
  const auto samples = scrape(key, ip, port);
  if (!samples) return std::nullopt;
  auto progress = progress_from_metrics(*samples, world, format_time(Clock::now()));
  if (!progress) return std::nullopt;
  const std::string dir = spec.value("training", json::object()).value("checkpoint", json::object()).value("dir", "");
  const int attempt = job.value("status", json::object()).value("attempt", 0);
  // The job's uid is its run (the pods' TORUS_RUN_ID): its checkpoints are in that folder of dir.
  const json& status = job.value("status", json::object());
  const std::string run = status.value("run", job.value("metadata", json::object()).value("uid", ""));
  return RankZeroReading{*progress, checkpoint_from_metrics(*samples, dir, run),
                         resumed_from_metrics(*samples, attempt, dir), goodput_from_metrics(*samples, attempt),
                         rank_arrival_from_metrics(*samples, attempt)};
}

std::optional<RankTarget> rank_target(const json& job, const json& pod, int local_rank, int rank) {
  const auto status = pod.find("status");
  const std::string ip = status != pod.end() && status->is_object() ? status->value("podIP", "") : "";
  if (ip.empty()) return std::nullopt;
  const int port = job.value("spec", json::object()).value("metricsPort", api::kDefaultMetricsPort) + local_rank;
  return RankTarget{rank, kube::object_key(pod), ip, port};
}

std::map<int, RankArrival> ProgressPoller::read_arrivals(const std::vector<RankTarget>& targets, int attempt) const {
  std::map<int, RankArrival> arrivals;
  for (size_t first = 0; first < targets.size(); first += kConcurrentReads) {
    const size_t end = std::min(targets.size(), first + kConcurrentReads);
    std::vector<std::future<std::optional<RankArrival>>> reads;
    for (size_t i = first; i < end; ++i) {
      reads.push_back(std::async(std::launch::async, [this, &t = targets[i], attempt] {
        const auto samples = scrape(t.pod_key, t.ip, t.port);
        return samples ? rank_arrival_from_metrics(*samples, attempt) : std::nullopt;
      }));
    }
    for (size_t i = first; i < end; ++i) {
      if (auto a = reads[i - first].get()) arrivals[targets[i].rank] = *a;
    }
  }
  return arrivals;
}

std::optional<std::map<std::string, double>> ProgressPoller::scrape(const std::string& key, const std::string& ip,
                                                                    int port) const {
  try {
    kube::ClusterConfig target;
    target.server = "http://" + ip + ":" + std::to_string(port);
    auto transport =
        kube::make_http_transport(target, kube::TransportOptions{std::chrono::ceil<std::chrono::seconds>(timeout_)});
    kube::HttpResponse r = transport->send({"GET", "/metrics", "", "text/plain", {}});
    if (r.status != 200) return std::nullopt;
    return parse_prometheus_text(r.body);
  } catch (const kube::ConnectionError& e) {
    TLOG(Debug) << "metrics of " << key << ": " << e.what();  // the rank is not serving yet; next time
    return std::nullopt;
  }
}

}  // namespace torus::controller

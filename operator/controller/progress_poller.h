#pragma once
// Reads rank 0's /metrics for Running jobs on a fixed period (ControllerOptions::progress_interval, 15 s by default):
// the controller requeues every Running job for its next read, so a quiet job's progress does not go stale waiting
// for some other event. Thread-safe: the controller's workers share one poller.
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "operator/controller/goodput_status.h"
#include "operator/controller/straggler_status.h"

namespace torus::controller {

// One read of rank 0's /metrics.
struct RankZeroReading {
  api::Progress progress;
  std::optional<api::CheckpointRef> checkpoint;  // the last checkpoint rank 0 wrote in its attempt
  std::optional<api::ResumePoint> resumed;       // where the job's current attempt started (without its time)
  std::optional<GoodputReading> goodput;         // rank 0's goodput ledger of the current attempt
  std::optional<RankArrival> arrival;            // rank 0's arrival figures (straggler_status.h)
};

// Where one rank serves its /metrics: local rank r of a worker pod serves metricsPort + r on the pod's IP.
struct RankTarget {
  int rank = 0;
  std::string pod_key;  // namespace/name, for the log
  std::string ip;
  int port = 0;
};
// The target of local rank `local_rank` of `pod` (global rank `rank`); nullopt while the pod has no IP.
std::optional<RankTarget> rank_target(const nlohmann::json& job, const nlohmann::json& pod, int local_rank, int rank);

class ProgressPoller {
 public:
  ProgressPoller(std::chrono::seconds interval, std::chrono::milliseconds timeout);

  // When a read of job `key` is due: rank 0's progress, read from `rank0`'s pod IP at the job's metricsPort.
  // nullopt when not due, when rank 0 has no IP yet, or when it does not answer (yet): the next read is due anyway.
  std::optional<RankZeroReading> poll(const std::string& key, const nlohmann::json& job, const nlohmann::json* rank0);
  // Time until the next read of `key` is due, at least 1 s: the requeue-after of a Running job.
  std::chrono::seconds next_in(const std::string& key) const;
  // The job is no longer Running: its next run starts with a read.
  void forget(const std::string& key);
  // Other ranks' arrival figures of `attempt`, read from their /metrics: the controller reads every rank when poll()
  // read rank 0 (the straggler's watch). Up to kConcurrentReads at once, each bounded by the timeout: a gang of 64
  // ranks, some of them hung, costs a pass a few timeouts, not one per rank. A rank that does not answer (yet), or
  // holds no figures of `attempt`, is left out.
  static constexpr int kConcurrentReads = 16;
  std::map<int, RankArrival> read_arrivals(const std::vector<RankTarget>& targets, int attempt) const;

 private:
  std::optional<RankZeroReading> read(const std::string& key, const nlohmann::json& job, const std::string& ip) const;
  // The samples of http://ip:port/metrics; nullopt when it does not answer 200 (yet).
  std::optional<std::map<std::string, double>> scrape(const std::string& key, const std::string& ip, int port) const;

  std::chrono::seconds interval_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_read_;
};

}  // namespace torus::controller

#pragma once
// The operator's metrics, one place for their names (see docs/observability.md). Registered once at start-up.
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/metrics/registry.h"

namespace torus::metrics {

class OperatorMetrics {
 public:
  explicit OperatorMetrics(Registry& registry, const std::string& version = "unknown");
  OperatorMetrics(const OperatorMetrics&) = delete;
  OperatorMetrics& operator=(const OperatorMetrics&) = delete;

  Counter& reconciles;                    // reconcile calls finished
  Family<Counter>& reconcile_errors;      // labels: reason (e.g. "api", "invalid_spec", "conflict")
  Histogram& reconcile_seconds;           // duration of one reconcile
  Family<Gauge>& jobs;                    // labels: namespace, phase; set with set_jobs_by_phase()
  Family<Counter>& gang_restarts;         // labels: namespace, job, reason (e.g. "pod_failed", "node_lost", "hang")
  Family<Histogram>& time_to_running;     // labels: namespace; creation -> every worker Running
  Family<Histogram>& time_to_first_step;  // labels: namespace; creation -> first optimizer step reported
  // A Running job's last closed straggler window (operator/controller/straggler_status.h), labels namespace, job:
  // its slowest rank's arrival offset at the all-reduce over the gang's median (1: even), and that rank.
  Family<Gauge>& straggler_slowdown;
  Family<Gauge>& straggler_rank;
  Family<Counter>& api_requests;        // labels: verb, code (HTTP status, or "error" for transport failures)
  Family<Counter>& api_request_errors;  // labels: verb, code; the non-2xx subset of api_requests
  Gauge& leader;                        // 1 while this replica holds the leader lease
  Gauge& workqueue_depth;               // keys waiting in the reconcile queue

  // Counts one API request; codes outside 200-299 (and transport errors, code 0) also count as errors.
  void record_api_request(const std::string& verb, int code);
  // Sets jobs{namespace, phase} to these counts, and to 0 for every pair seen before but absent now.
  void set_jobs_by_phase(const std::map<std::pair<std::string, std::string>, int>& counts);

 private:
  std::mutex jobs_mutex_;
  std::map<std::pair<std::string, std::string>, int> last_job_counts_;
};

// Buckets for the "time to" histograms: 1 s to ~4.5 h, doubling.
std::vector<double> startup_time_buckets();

}  // namespace torus::metrics

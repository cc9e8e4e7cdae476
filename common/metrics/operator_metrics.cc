#include "common/metrics/operator_metrics.h"

#include "common/metrics/metric_names.h"

namespace torus::metrics {

std::vector<double> startup_time_buckets() { return exponential_buckets(1.0, 2.0, 15); }

OperatorMetrics::OperatorMetrics(Registry& r, const std::string& version)
    : reconciles(r.counter(name::kOperatorReconcilesTotal, "Reconcile calls finished.").labels({})),
      reconcile_errors(
          r.counter(name::kOperatorReconcileErrorsTotal, "Reconcile calls that failed, by reason.", {"reason"})),
      reconcile_seconds(r.histogram(name::kOperatorReconcileSeconds, "Duration of one reconcile call.", {},
                                    exponential_buckets(0.0005, 2.0, 16))
                            .labels({})),
      jobs(r.gauge(name::kOperatorJobs, "TrainingJobs by namespace and phase.", {"namespace", "phase"})),
      gang_restarts(r.counter(name::kOperatorGangRestartsTotal, "Gang restarts of a TrainingJob, by reason.",
                              {"namespace", "job", "reason"})),
      time_to_running(r.histogram(name::kOperatorTimeToRunningSeconds,
                                  "Time from a TrainingJob's creation until all its workers run.", {"namespace"},
                                  startup_time_buckets())),
      time_to_first_step(r.histogram(name::kOperatorTimeToFirstStepSeconds,
                                     "Time from a TrainingJob's creation until its first optimizer step.",
                                     {"namespace"}, startup_time_buckets())),
      straggler_slowdown(r.gauge(name::kOperatorStragglerSlowdown,
                                 "A running job's slowest rank's arrival offset at the all-reduce over the gang's "
                                 "median, over its last window of steps (1: even; the Straggler condition from 1.25).",
                                 {"namespace", "job"})),
      straggler_rank(r.gauge(name::kOperatorStragglerRank, "The rank torus_operator_straggler_slowdown is of.",
                             {"namespace", "job"})),
      api_requests(r.counter(name::kOperatorApiRequestsTotal, "Kubernetes API requests, by verb and HTTP code.",
                             {"verb", "code"})),
      api_request_errors(r.counter(name::kOperatorApiRequestErrorsTotal,
                                   "Kubernetes API requests that failed (non-2xx or transport error).",
                                   {"verb", "code"})),
      leader(r.gauge(name::kOperatorLeader, "1 while this replica holds the leader lease, else 0.").labels({})),
      workqueue_depth(r.gauge(name::kOperatorWorkqueueDepth, "Keys waiting in the reconcile queue.").labels({})) {
  // A constant 1 whose labels say which build is running, the usual Prometheus idiom.
  r.gauge(name::kOperatorBuildInfo, "Build of the running operator (always 1).", {"version"}).labels({version}).set(1);
}

void OperatorMetrics::record_api_request(const std::string& verb, int code) {
  const std::string code_label = code == 0 ? "error" : std::to_string(code);
  api_requests.labels({verb, code_label}).inc();
  if (code < 200 || code > 299) api_request_errors.labels({verb, code_label}).inc();
}

void OperatorMetrics::set_jobs_by_phase(const std::map<std::pair<std::string, std::string>, int>& counts) {
  std::lock_guard lock(jobs_mutex_);
  for (const auto& [key, count] : last_job_counts_) {
    if (counts.find(key) == counts.end()) jobs.labels({key.first, key.second}).set(0);
  }
  for (const auto& [key, count] : counts) jobs.labels({key.first, key.second}).set(count);
  last_job_counts_ = counts;
}

}  // namespace torus::metrics

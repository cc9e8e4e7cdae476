#pragma once
// The TrainingJob controller (controller-runtime architecture): informers on TrainingJobs and on the pods,
// services, config maps and secrets the operator owns (one set per watched namespace, or one cluster-wide set); a
// work queue of job keys shared by all of them; N workers that run the pure planner on the cached state and apply
// its actions through the API.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/operator_metrics.h"
#include "operator/controller/disrupted_pods.h"
#include "operator/controller/planner.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/write_pacing.h"
#include "operator/kube/client.h"
#include "operator/kube/informer.h"
#include "operator/kube/work_queue.h"

namespace torus::controller {

struct ControllerOptions {
  std::vector<std::string> namespaces;  // the namespaces watched, one informer each per kind; empty = every namespace
  int workers = 4;
  std::chrono::seconds progress_interval{15};  // how often a Running job's progress is read from rank 0 (requeued)
  std::chrono::milliseconds scrape_timeout{2000};
  std::string default_worker_image;  // for jobs whose spec.gang.image is empty (the chart's --worker-image)
};

class Controller {
 public:
  // `metrics` may be null.
  Controller(kube::Client& client, ControllerOptions options, metrics::OperatorMetrics* metrics);
  ~Controller();  // stops; never throws
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the informers, waits for their caches, then starts the workers. Returns false if the caches did
  // not sync within `sync_timeout`.
  bool start(std::chrono::milliseconds sync_timeout);
  void stop();
  bool synced() const;

  // One reconcile of "ns/name" (public for tests). Throws on API errors; the worker loop requeues.
  std::optional<std::chrono::seconds> reconcile(const std::string& key);

 private:
  void worker_loop();
  void process(const std::string& key);
  // Queues the child's job after a short window (kChildEventWindow), so that events arriving together make one pass.
  void enqueue_owner(const json& child);
  // Nodes (cluster-scoped, names and labels only) for jobs with runPolicy.topology.key; false when the operator
  // may not list them (403: one warning, and jobs run without rack ordering).
  bool watch_nodes();
  bool add_node_informer();
  void enqueue_topology_jobs();
  std::optional<BlockMap> node_blocks(const json& job) const;
  // The informers of one watched namespace (or of all namespaces, keyed "").
  struct Caches {
    kube::Informer* jobs = nullptr;
    kube::Informer* pods = nullptr;
    kube::Informer* services = nullptr;
    kube::Informer* config_maps = nullptr;
    kube::Informer* secrets = nullptr;
  };
  // The caches holding namespace `ns`, or null when it is not watched.
  const Caches* caches_of(const std::string& ns) const;
  PlanInput observe(const Caches& caches, const json& job, const std::string& ns, const std::string& name) const;
  // Applies `plan`; stops at a create the server refuses for good and returns it (the caller replans to fail the job).
  std::optional<RefusedChild> apply(const json& job, const Plan& plan, const std::string& ns);
  // The plan's status with rank 0's progress when the poller read it (Running jobs, on its period); nullopt when
  // neither changes anything. A job that is not Running is forgotten by the poller.
  // Also the last checkpoint rank 0 wrote (status.lastCheckpoint) and, once per attempt, the step it resumed from
  // (status.resumedFrom, and a Resumed event appended to `events`).
  std::optional<json> with_progress(const json& job, const Plan& plan, const std::string& ns,
                                    std::vector<EventRecord>& events);
  static void record_resume(json& status, const api::ResumePoint& read, std::vector<EventRecord>& events);
  static void record_goodput(json& status, const GoodputReading& reading, int64_t resumed_step);
  // The Straggler condition and events (straggler_status.h): every other rank's arrival figures read beside rank 0's
  // (`rank0`), fed to the job's watch; a window they close sets the condition in `status` and the straggler metrics.
  void record_straggler(const json& job, json& status, const std::optional<RankArrival>& rank0,
                        std::vector<EventRecord>& events);
  void observe_straggler(const json& job, const process::StragglerWindow& window);
  // The pass's creates, in order; stops at the first failure: a refusal for good is returned, anything else thrown.
  std::optional<RefusedChild> create_children(const json& job, const std::vector<CreateAction>& creates,
                                              const std::string& ns);
  void create_child(ChildKind kind, const std::string& ns, const json& object);
  // A create refused in a way that may pass later (403 quota or RBAC, 404...) is a FailedCreate Warning event on the
  // job, once per distinct message, before the pass is retried with backoff.
  void warn_failed_create(const json& job, const CreateAction& create, const kube::ApiError& error);
  // A PodGroup the cluster does not serve (its scheduler is not installed) or RBAC forbids is a warning event on
  // the job, not an error: the pods are created anyway, and their Pending reason says the rest.
  void create_pod_group(const json& job, const std::string& ns, const json& group);
  void create_claim(const std::string& ns, const json& claim);
  // A 409 re-reads the job into the cache before it is rethrown, so the retried pass plans from fresh state.
  void write_status(const json& job, json status, const std::string& ns);
  void cache_job(json stored, const std::string& ns);
  void record_event(const json& job, const EventRecord& event);
  kube::ObjectPtr rank0_of(const json& job, const std::string& ns) const;  // null when not cached
  void observe_metrics(const json& job, const Plan& plan);
  void count_jobs_by_phase();
  bool still_exists(const json& job, const std::string& ns, const std::string& name);

  kube::Client& client_;
  ControllerOptions options_;
  metrics::OperatorMetrics* metrics_;
  kube::WorkQueue queue_;
  std::vector<std::unique_ptr<kube::Informer>> informers_;
  std::map<std::string, Caches> caches_;  // by watched namespace; "" when watching all of them
  kube::Informer* nodes_ = nullptr;       // null when nodes cannot be listed
  std::vector<std::thread> workers_;
  std::mutex bookkeeping_mu_;  // guards last_failed_create_ and last_phase_count_
  ProgressPoller progress_;
  StragglerWatches stragglers_;  // by job key, while it runs
  CreateExpectations expectations_;
  StatusPacing status_pacing_;
  JobViews views_;                   // the last decoded view of each job, by key
  mutable DisruptedPods disrupted_;  // pods gone with a DisruptionTarget condition, as last seen, by job key (locked)
  // By job key: the last FailedCreate message recorded (guarded by bookkeeping_mu_).
  std::map<std::string, std::string> last_failed_create_;
  std::chrono::steady_clock::time_point last_phase_count_{};
  enum class State { kIdle, kRunning, kStopped } state_ = State::kIdle;
};

}  // namespace torus::controller

#include "operator/controller/controller.h"

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "common/log/log.h"
#include "common/util/random.h"
#include "operator/controller/labels.h"
#include "operator/controller/progress.h"
#include "operator/controller/time_util.h"

namespace torus::controller {
namespace {

namespace res = kube::resources;
constexpr const char* kByJob = "job";
constexpr std::chrono::milliseconds kChildEventWindow{200};  // child events coalesced into one pass of their job

// Index children by "ns/<job-name label>".
std::vector<std::string> job_of(const json& obj) {
  const json& md = member(obj, "metadata");
  const json& labels = member(md, "labels");
  auto it = labels.find(kLabelJobName);
  if (it == labels.end() || !it->is_string()) return {};
  return {md.value("namespace", "") + "/" + it->get<std::string>()};
}

const kube::Resource& resource_of(ChildKind kind) {
  switch (kind) {
    case ChildKind::kPod:
      return res::kPods;
    case ChildKind::kService:
      return res::kServices;
    case ChildKind::kConfigMap:
      return res::kConfigMaps;
    case ChildKind::kSecret:
      return res::kSecrets;
    case ChildKind::kPodGroup:
      return res::kCoschedulingPodGroups;  // create_pod_group picks by apiVersion
    case ChildKind::kClaim:
      return res::kPersistentVolumeClaims;
  }
  return res::kPods;
}

std::pair<std::string, std::string> split_key(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// The job's own children only: a child whose controller reference names another uid (an earlier job of the same
// name, being garbage collected) must not be mistaken for ours.
// The cached objects are shared, not copied.
Objects owned_by(const std::vector<kube::ObjectPtr>& objects, const std::string& uid) {
  Objects out;
  out.reserve(objects.size());
  for (const auto& o : objects) {
    if (controlled_by(*o, uid)) out.push_back(o);
  }
  return out;
}

// The job's phase once `plan` is applied.
std::string phase_after(const json& job, const Plan& plan) {
  return plan.status ? plan.status->value("phase", "") : member(job, "status").value("phase", "");
}

// What the caches keep of each kind, left out while the watch events are parsed: no object's managedFields (a real
// server's, read by no one); of a pod, its metadata, status, spec.nodeName (the planner's rank map) and
// spec.schedulerName (what an unscheduled worker waits for), as its
// containers, env and volumes are most of its JSON and change in none of its events; of a secret, its name (data
// stays out of the operator's memory). Config maps are kept whole: the planner compares and rewrites them.
kube::FieldFilter cached_fields(const kube::Resource& r) {
  kube::FieldFilter fields;
  fields.drop("metadata.managedFields");
  if (r.plural == res::kPods.plural && r.group == res::kPods.group)
    fields.keep_only("spec", {"nodeName", "schedulerName"});
  if (r.plural == res::kSecrets.plural && r.group == res::kSecrets.group) fields.drop("data").drop("stringData");
  return fields;
}

// 400 BadRequest and 422 Invalid: the object as built is wrong, and the same spec builds it the same way again.
bool refused_for_good(const kube::ApiError& e) { return e.status() == 400 || e.status() == 422; }

}  // namespace

Controller::Controller(kube::Client& client, ControllerOptions options, metrics::OperatorMetrics* metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      progress_(options_.progress_interval, options_.scrape_timeout) {
  auto enqueue_job = [this](const json& job) { queue_.add(kube::object_key(job)); };
  kube::InformerHandlers job_handlers{enqueue_job, [enqueue_job](const json&, const json& j) { enqueue_job(j); },
                                      enqueue_job};
  auto owner = [this](const json& child) { enqueue_owner(child); };
  kube::InformerHandlers child_handlers{owner, [owner](const json&, const json& c) { owner(c); }, owner};
  // A pod's final state is kept when it was disrupted (disrupted_pods.h): the pass may come after it is gone.
  kube::InformerHandlers pod_handlers = child_handlers;
  pod_handlers.on_delete = [this](const json& pod) {
    for (const auto& key : job_of(pod)) disrupted_.gone(key, pod);
    enqueue_owner(pod);
  };
  // One list+watch per kind and namespace: a namespaced operator needs no cluster-wide read permission.
  const std::vector<std::string> scopes =
      options_.namespaces.empty() ? std::vector<std::string>{""} : options_.namespaces;
  for (const std::string& ns : scopes) {
    auto add = [&](const kube::Resource& r, const std::string& selector, const kube::InformerHandlers& h) {
      kube::InformerOptions informer{ns, selector};
      informer.fields = cached_fields(r);
      informers_.push_back(std::make_unique<kube::Informer>(client_, r, std::move(informer), h));
      informers_.back()->store().add_index(kByJob, job_of);
      return informers_.back().get();
    };
    Caches& c = caches_[ns];
    c.jobs = add(res::kTrainingJobs, "", job_handlers);
    c.pods = add(res::kPods, owned_selector(), pod_handlers);
    c.services = add(res::kServices, owned_selector(), child_handlers);
    c.config_maps = add(res::kConfigMaps, owned_selector(), child_handlers);
    c.secrets = add(res::kSecrets, owned_selector(), child_handlers);
  }
}

namespace {

// A node as the block map reads it: its name and labels (a Node's status is large and changes often).
json node_labels_only(json node) {
  json md = node.value("metadata", json::object());
  return {{"apiVersion", node.value("apiVersion", "v1")},
          {"kind", "Node"},
          {"metadata",
           {{"name", md.value("name", "")},
            {"resourceVersion", md.value("resourceVersion", "")},
            {"labels", md.value("labels", json::object())}}}};
}

std::string topology_key_of(const json& job) {
  const json& topology = member(member(member(job, "spec"), "runPolicy"), "topology");
  auto key = topology.find("key");
  return key != topology.end() && key->is_string() ? key->get<std::string>() : "";
}

}  // namespace

bool Controller::watch_nodes() {
  try {
    // A permission probe: one node is enough (the informer lists them all right after).
    client_.list(res::kNodes, "", {.limit = 1});
  } catch (const kube::ApiError& e) {
    if (e.status() != 403) {
      // Not a permission problem: the informer's own list retries with backoff.
      TLOG(Info) << "controller: listing nodes: " << e.what() << "; the node informer retries";
      return add_node_informer();
    }
    TLOG(Warn) << "controller: cannot list nodes (" << e.what()
               << "); jobs with spec.runPolicy.topology.key run without rack ordering. Grant get/list/watch on "
                  "nodes through a ClusterRole (the Helm chart does) to enable it";
    return false;
  }
  return add_node_informer();
}

bool Controller::add_node_informer() {
  auto relabelled = [this](const json& old_node, const json& node) {
    if (member(member(old_node, "metadata"), "labels") != member(member(node, "metadata"), "labels")) {
      enqueue_topology_jobs();
    }
  };
  auto changed = [this](const json&) { enqueue_topology_jobs(); };
  kube::InformerOptions options{"", ""};
  options.transform = node_labels_only;
  informers_.push_back(std::make_unique<kube::Informer>(client_, res::kNodes, std::move(options),
                                                        kube::InformerHandlers{changed, relabelled, changed}));
  nodes_ = informers_.back().get();
  return true;
}

void Controller::enqueue_topology_jobs() {
  for (const auto& [ns, caches] : caches_) {
    for (const auto& job : caches.jobs->store().list()) {
      if (!topology_key_of(*job).empty()) queue_.add(kube::object_key(*job));
    }
  }
}

std::optional<BlockMap> Controller::node_blocks(const json& job) const {
  if (!nodes_) return std::nullopt;
  std::vector<json> nodes;
  for (const auto& node : nodes_->store().list()) nodes.push_back(*node);  // names and labels only (node_labels_only)
  return block_map(nodes, topology_key_of(job));
}

const Controller::Caches* Controller::caches_of(const std::string& ns) const {
  auto it = caches_.find("");
  if (it == caches_.end()) it = caches_.find(ns);
  return it == caches_.end() ? nullptr : &it->second;
}

Controller::~Controller() { stop(); }

void Controller::enqueue_owner(const json& child) {
  // A gang's pods change together (created, bound, started, ready): the events of one short window make one pass.
  for (const auto& key : job_of(child)) queue_.add_after(key, kChildEventWindow);
}

bool Controller::start(std::chrono::milliseconds sync_timeout) {
  if (state_ != State::kIdle) return state_ == State::kRunning;
  watch_nodes();
  for (auto& inf : informers_) inf->start();
  auto deadline = std::chrono::steady_clock::now() + sync_timeout;
  for (auto& inf : informers_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!inf->wait_synced(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  state_ = State::kRunning;
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { worker_loop(); });
  std::string scope;
  for (const auto& [ns, caches] : caches_) scope += (scope.empty() ? "" : ", ") + (ns.empty() ? "all namespaces" : ns);
  TLOG(Info) << "controller: caches synced (" << scope << "), " << workers_.size() << " workers started";
  return true;
}

bool Controller::synced() const {
  for (const auto& inf : informers_) {
    if (!inf->synced()) return false;
  }
  return true;
}

void Controller::stop() {
  if (state_ == State::kStopped) return;
  state_ = State::kStopped;
  queue_.shutdown();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  for (auto& inf : informers_) inf->stop();
}

void Controller::worker_loop() {
  while (auto key = queue_.get()) {
    process(*key);
    queue_.done(*key);
    if (metrics_) metrics_->workqueue_depth.set(static_cast<double>(queue_.length()));
  }
}

void Controller::process(const std::string& key) {
  auto started = std::chrono::steady_clock::now();
  try {
    auto requeue = reconcile(key);
    queue_.forget(key);
    if (requeue) queue_.add_after(key, *requeue);
    if (metrics_) metrics_->reconciles.inc();
  } catch (const kube::ApiError& e) {
    // A conflict means our cache was stale: requeue and plan again from fresher state (write_status re-read it).
    if (metrics_) metrics_->reconcile_errors.labels({e.conflict() ? "conflict" : "api"}).inc();
    if (e.conflict()) {
      // Not an error: redone promptly (a short backoff of its own), never pushed out by the 1000 s error cap.
      TLOG(Debug) << "reconcile " << key << ": " << e.what();
      queue_.add_conflicted(key);
    } else {
      TLOG(Warn) << "reconcile " << key << ": " << e.what();
      queue_.add_rate_limited(key);
    }
  } catch (const std::exception& e) {  // the worker loop's top: one bad pass must not stop the controller
    if (metrics_) metrics_->reconcile_errors.labels({"error"}).inc();
    TLOG(Warn) << "reconcile " << key << ": " << e.what();
    queue_.add_rate_limited(key);
  }
  if (metrics_) {
    metrics_->reconcile_seconds.observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    count_jobs_by_phase();
  }
}

void Controller::count_jobs_by_phase() {
  {
    // At most once a second: it walks the whole job cache.
    std::lock_guard lock(bookkeeping_mu_);
    auto now = std::chrono::steady_clock::now();
    if (now - last_phase_count_ < std::chrono::seconds(1)) return;
    last_phase_count_ = now;
  }
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const auto& [ns, caches] : caches_) {
    for (const auto& job : caches.jobs->store().list()) {
      std::string phase = member(*job, "status").value("phase", "Pending");
      ++counts[{(*job)["metadata"].value("namespace", ""), phase}];
    }
  }
  metrics_->set_jobs_by_phase(counts);
}

PlanInput Controller::observe(const Caches& caches, const json& job, const std::string& ns,
                              const std::string& name) const {
  std::string key = ns + "/" + name;
  std::string uid = job["metadata"].value("uid", "");
  return PlanInput{job,
                   owned_by(caches.pods->store().by_index(kByJob, key), uid),
                   owned_by(caches.services->store().by_index(kByJob, key), uid),
                   owned_by(caches.config_maps->store().by_index(kByJob, key), uid),
                   owned_by(caches.secrets->store().by_index(kByJob, key), uid),
                   Clock::now(),
                   "",
                   topology_key_of(job).empty() ? std::nullopt : node_blocks(job),
                   std::nullopt,
                   nullptr,
                   disrupted_.of(key, uid, member(job, "status").value("attempt", 0))};
}

std::optional<std::chrono::seconds> Controller::reconcile(const std::string& key) {
  auto [ns, name] = split_key(key);
  const Caches* caches = caches_of(ns);
  if (!caches) return std::nullopt;                            // not a watched namespace
  const kube::ObjectPtr job = caches->jobs->store().get(key);  // shared with the cache: read, never modified
  if (!job) {                                                  // deleted: garbage collection removes the children
    progress_.forget(key);
    stragglers_.forget(key);
    views_.forget(key);
    disrupted_.forget(key);
    expectations_.forget(key);
    status_pacing_.forget(key);
    std::lock_guard lock(bookkeeping_mu_);
    last_failed_create_.erase(key);
    return std::nullopt;
  }
  PlanInput input = observe(*caches, *job, ns, name);
  if (!options_.default_worker_image.empty()) {
    json& image = input.job["spec"]["gang"]["image"];
    const bool gpu = input.job["spec"]["gang"].value("device", "") == "gpu";
    if (!image.is_string() || image.get<std::string>().empty())
      image = api::default_worker_image(gpu ? api::Device::kGpu : api::Device::kCpu, options_.default_worker_image);
  }
  input.view = views_.get(key, input.job);
  bool needs_secret = input.secrets.empty();
  if (needs_secret) input.fresh_secret = random_secret();
  Plan plan = controller::plan(input);
  if (plan.ownership == Plan::Ownership::kHandedOff) return std::nullopt;
  expectations_.filter(key, input, plan);
  // A job acted on before: it has a status, or an earlier pass made its children and deferred the accepted status.
  const bool acted_on = job->contains("status") || status_pacing_.accepting(key);
  const std::optional<std::chrono::seconds> deferred = status_pacing_.defer(key, *job, plan, input.now);
  if (deferred) plan.status.reset();  // written by the pass `deferred` from now, with what has changed by then
  if (!plan.creates.empty() && acted_on && !still_exists(*job, ns, name)) return std::nullopt;
  observe_metrics(*job, plan);
  if (auto refused = apply(*job, plan, ns)) {
    const bool for_good = refused->refusal == RefusedChild::Refusal::kForGood;
    TLOG(Warn) << "reconcile " << key << ": " << to_string(refused->kind) << " " << refused->name << " refused ("
               << refused->code << "): " << refused->message
               << (for_good ? "; the job fails" : "; the job waits, retried with backoff");
    input.refused_child = std::move(refused);
    Plan next = controller::plan(input);
    observe_metrics(*job, next);
    apply(*job, next, ns);
    // Admission may say yes later (a namespace label, a PriorityClass, a fixed template): the work queue's backoff.
    if (!for_good) throw kube::ApiError(input.refused_child->code, "Forbidden", input.refused_child->message);
    return next.requeue_after;
  }
  std::optional<std::chrono::seconds> requeue = plan.requeue_after;
  if (deferred) requeue = requeue ? std::min(*requeue, *deferred) : *deferred;
  if (phase_after(*job, plan) == "Running") {
    // The next read of rank 0's progress: a quiet job is polled on the promised period, not only on events.
    const auto next = progress_.next_in(key);
    requeue = requeue ? std::min(*requeue, next) : next;
  }
  return requeue;
}

kube::ObjectPtr Controller::rank0_of(const json& job, const std::string& ns) const {
  const Caches* caches = caches_of(ns);
  if (!caches) return nullptr;
  return caches->pods->store().get(ns + "/" + worker_pod_name(job["metadata"].value("name", ""), 0));
}

bool Controller::still_exists(const json& job, const std::string& ns, const std::string& name) {
  // The children's DELETED events can arrive before the job's own: a cached job that is already gone would get
  // its children recreated, owned by a uid that no longer exists. One live read before creating settles it.
  auto live = client_.try_get(res::kTrainingJobs, ns, name);
  return live && (*live)["metadata"].value("uid", "") == job["metadata"].value("uid", "") &&
         !(*live)["metadata"].contains("deletionTimestamp");
}

void Controller::observe_metrics(const json& job, const Plan& plan) {
  if (!metrics_ || !plan.status) return;
  std::string ns = job["metadata"].value("namespace", "");
  std::string old_phase = member(job, "status").value("phase", "");
  std::string new_phase = plan.status->value("phase", "");
  if (new_phase == "Running" && old_phase != "Running") {
    if (auto created = parse_time(job["metadata"].value("creationTimestamp", ""))) {
      metrics_->time_to_running.labels({ns}).observe(std::chrono::duration<double>(Clock::now() - *created).count());
    }
  }
  if (plan.status->value("restarts", 0) > member(job, "status").value("restarts", 0)) {
    metrics_->gang_restarts.labels({ns, job["metadata"].value("name", ""), "pod_failed"}).inc();
  }
  if (plan.status->value("disruptions", 0) > member(job, "status").value("disruptions", 0)) {
    metrics_->gang_restarts.labels({ns, job["metadata"].value("name", ""), "disrupted"}).inc();
  }
}

void Controller::create_child(ChildKind kind, const std::string& ns, const json& object) {
  try {
    client_.create_unread(resource_of(kind), ns, object);
  } catch (const kube::ApiError& e) {
    // Deterministic names: "already exists" means an earlier pass (or replica) created it; nothing to do.
    if (!e.already_exists()) throw;
  }
}

std::optional<json> Controller::with_progress(const json& job, const Plan& plan, const std::string& ns,
                                              std::vector<EventRecord>& events) {
  std::optional<json> status = plan.status;
  const std::string key = kube::object_key(job);
  if (phase_after(job, plan) != "Running") {
    progress_.forget(key);
    stragglers_.forget(key);
    return status;
  }
  const auto reading = progress_.poll(key, job, rank0_of(job, ns).get());
  if (!reading) return status;
  json base = status ? *status : member(job, "status");
  const json before = base;
  base["progress"] = api::status_to_json(api::TrainingJobStatus{.progress = reading->progress})["progress"];
  if (reading->checkpoint && member(base, "lastCheckpoint").value("step", int64_t{0}) != reading->checkpoint->step) {
    base["lastCheckpoint"] =
        api::status_to_json(api::TrainingJobStatus{.last_checkpoint = *reading->checkpoint})["lastCheckpoint"];
  }
  if (reading->resumed) record_resume(base, *reading->resumed, events);
  if (reading->goodput) record_goodput(base, *reading->goodput, reading->resumed ? reading->resumed->step : 0);
  record_straggler(job, base, reading->arrival, events);
  if (base != before) status = base;
  return status;
}

std::optional<RefusedChild> Controller::apply(const json& job, const Plan& plan, const std::string& ns) {
  for (const auto& d : plan.deletes) {
    TLOG(Info) << "delete " << ns << "/" << d.name << ": " << d.reason;
    client_.remove(resource_of(d.kind), ns, d.name);
  }
  for (const auto& u : plan.updates) client_.update(resource_of(u.kind), ns, u.object);
  if (auto refused = create_children(job, plan.creates, ns)) return refused;
  std::vector<EventRecord> events = plan.events;
  if (std::optional<json> status = with_progress(job, plan, ns, events)) write_status(job, std::move(*status), ns);
  for (const auto& e : events) record_event(job, e);
  if (plan.job_action == Plan::JobAction::kDelete) {
    client_.remove(res::kTrainingJobs, ns, job["metadata"].value("name", ""), kube::Propagation::kForeground);
  }
  return std::nullopt;
}

std::optional<RefusedChild> Controller::create_children(const json& job, const std::vector<CreateAction>& creates,
                                                        const std::string& ns) {
  for (const auto& c : creates) {
    try {
      if (c.kind == ChildKind::kPodGroup) {
        create_pod_group(job, ns, c.object);
      } else if (c.kind == ChildKind::kClaim) {
        create_claim(ns, c.object);
      } else {
        create_child(c.kind, ns, c.object);
      }
      expectations_.created(kube::object_key(job), c, Clock::now());
    } catch (const kube::ApiError& e) {
      if (refused_for_good(e))
        return RefusedChild{c.kind, c.object["metadata"].value("name", ""), e.status(), e.what()};
      if (e.status() == 403) {
        warn_failed_create(job, c, e);
        return RefusedChild{c.kind, c.object["metadata"].value("name", ""), e.status(),
                            e.server_message().empty() ? e.what() : e.server_message(),
                            RefusedChild::Refusal::kByAdmission};
      }
      if (e.status() / 100 == 4 && e.status() != 409 && e.status() != 429) warn_failed_create(job, c, e);
      throw;
    }
  }
  return std::nullopt;
}

void Controller::warn_failed_create(const json& job, const CreateAction& create, const kube::ApiError& error) {
  const std::string message = "creating " + std::string(to_string(create.kind)) + " " +
                              create.object["metadata"].value("name", "") + ": " + error.what() +
                              "; retrying with backoff";
  {
    std::lock_guard lock(bookkeeping_mu_);
    std::string& last = last_failed_create_[kube::object_key(job)];
    if (last == message) return;
    last = message;
  }
  record_event(job, {EventType::kWarning, "FailedCreate", message});
}

// Not cached by an informer: made again with each missing worker 0, where "already exists" is the usual answer.
void Controller::create_claim(const std::string& ns, const json& claim) {
  try {
    client_.create_unread(res::kPersistentVolumeClaims, ns, claim);
  } catch (const kube::ApiError& e) {
    if (!e.already_exists()) throw;
  }
}

void Controller::create_pod_group(const json& job, const std::string& ns, const json& group) {
  const std::string api_version = group.value("apiVersion", "");
  const kube::Resource& r = api_version.rfind(res::kVolcanoPodGroups.group + "/", 0) == 0 ? res::kVolcanoPodGroups
                                                                                          : res::kCoschedulingPodGroups;
  try {
    client_.create_unread(r, ns, group);
  } catch (const kube::ApiError& e) {
    if (e.already_exists()) return;
    if (e.status() != 404 && e.status() != 403) throw;
    const std::string why = e.status() == 404
                                ? "is not served by this cluster (is its scheduler installed?)"
                                : "may not be created by the operator (RBAC: create podgroups in " + r.group + ")";
    record_event(job, {EventType::kWarning, "PodGroupNotCreated",
                       "PodGroup " + api_version + " " + group["metadata"].value("name", "") + " " + why +
                           ": the gang is not scheduled as one"});
  }
}

void Controller::write_status(const json& job, json status, const std::string& ns) {
  json updated = job;
  updated["status"] = std::move(status);
  // PUT with the cached resourceVersion: a 409 tells us the cache was stale, and the pass is redone.
  const std::string name = job["metadata"].value("name", "");
  std::optional<json> stored;
  try {
    stored = client_.update(res::kTrainingJobs, ns, updated, kube::Subresource::kStatus);
  } catch (const kube::ApiError& e) {
    if (!e.conflict()) throw;
    stored = client_.try_get(res::kTrainingJobs, ns, name);  // the retried pass must not plan from the stale copy
    if (stored) cache_job(std::move(*stored), ns);
    throw;
  }
  status_pacing_.wrote(kube::object_key(job), Clock::now());
  cache_job(std::move(*stored), ns);  // so that the next pass does not replan from the stale copy
}

void Controller::cache_job(json stored, const std::string& ns) {
  stored["apiVersion"] = res::kTrainingJobs.api_version();
  stored["kind"] = res::kTrainingJobs.kind;
  if (const Caches* caches = caches_of(ns)) caches->jobs->store().upsert(std::move(stored));
}

void Controller::record_event(const json& job, const EventRecord& e) {
  const json& md = job["metadata"];
  std::string now = format_time(Clock::now());
  json event = {{"apiVersion", res::kEvents.api_version()},
                {"kind", res::kEvents.kind},
                {"metadata",
                 {{"name", md.value("name", "") + "." + random_secret().substr(0, 16)},
                  {"namespace", md.value("namespace", "")}}},
                {"involvedObject",
                 {{"apiVersion", res::kTrainingJobs.api_version()},
                  {"kind", res::kTrainingJobs.kind},
                  {"name", md.value("name", "")},
                  {"namespace", md.value("namespace", "")},
                  {"uid", md.value("uid", "")}}},
                {"reason", e.reason},
                {"message", e.message},
                {"type", e.type == EventType::kWarning ? "Warning" : "Normal"},
                {"source", {{"component", "torus-operator"}}},
                {"firstTimestamp", now},
                {"lastTimestamp", now},
                {"count", 1}};
  try {
    client_.create_unread(res::kEvents, md.value("namespace", ""), event);
  } catch (const kube::ApiError& err) {
    TLOG(Warn) << "event " << e.reason << " for " << md.value("name", "") << ": " << err.what();  // best effort
  }
}

}  // namespace torus::controller

// The controller's API economy against the stand-in (real `torus operator` and kube-standin processes): the requests
// one 8-worker job costs from creation to Running, counted by the stand-in; and a status left stale by a storm of
// 409s rewritten promptly (the conflict backoff, not the error backoff's 1000 s cap); a job shown Pending while its
// pods have not started; a job its validation refuses never said to be accepted.
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "operator/controller/time_util.h"
#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

// The operator's rules for a job's status writes (operator/controller/write_pacing.h): the accepted status waits up
// to kAcceptedWindow from the job's first pass; a change that only follows the pods is written at most once per
// kPodWindow; a phase change at once.
constexpr auto kAcceptedWindow = 3s;
constexpr auto kPodWindow = 1s;

// Every status one job was seen with, in order, and when the test saw it: a watch of its own client (the fixture's
// client counts only the test's reads), from a resourceVersion taken before the job exists, so no write is missed.
// A status is seen after it was written: the times are upper bounds of the writes' times, and load only moves them
// later.
class StatusHistory {
 public:
  struct Seen {
    json status;
    std::chrono::steady_clock::time_point at;
  };
  StatusHistory(const kube::ClusterConfig& config, std::string name)
      : client_(config, kube::ClientOptions{}), name_(std::move(name)) {
    from_ = client_.list(res::kTrainingJobs, kNs)["metadata"].value("resourceVersion", "");
    thread_ = std::thread([this] { watch(); });
  }
  ~StatusHistory() {
    cancel_.cancel();
    thread_.join();
  }
  StatusHistory(const StatusHistory&) = delete;
  StatusHistory& operator=(const StatusHistory&) = delete;

  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  std::string dump() {
    std::string out;
    for (const Seen& s : seen()) out += "\n  " + s.status.dump();
    return out;
  }

 private:
  void watch() {
    try {
      client_.watch(
          res::kTrainingJobs, kNs, {.resource_version = from_, .timeout = 600s},
          [&](kube::WatchEvent& e) {
            if (e.type == "BOOKMARK" || e.object["metadata"].value("name", "") != name_) return;
            const json status = e.object.value("status", json::object());
            std::lock_guard lock(mu_);
            if (status.empty() || (!seen_.empty() && seen_.back().status == status)) return;
            seen_.push_back({status, std::chrono::steady_clock::now()});
          },
          cancel_);
    } catch (const std::exception& e) {
      if (!cancel_.cancelled()) ADD_FAILURE() << "the status watch failed: " << e.what();
    }
  }

  kube::Client client_;
  std::string name_;
  std::string from_;
  kube::StreamCancel cancel_;
  std::mutex mu_;
  std::vector<Seen> seen_;
  std::thread thread_;
};

// `writes` status writes of a job created after `before` (by the stand-in's count), against the statuses `history`
// saw: each write changed the status, the last made it Running, and any before it follow the rules above. The first
// of several is the accepted status (Pending), written when the window closed, so seen no sooner than kAcceptedWindow
// after `before`; the ones between it and Running were paced, so at most one per kPodWindow after that.
void expect_paced_writes(StatusHistory& history, int64_t writes, std::chrono::steady_clock::time_point before) {
  const std::vector<StatusHistory::Seen> seen = history.seen();
  ASSERT_EQ(static_cast<int64_t>(seen.size()), writes) << "a write that changed nothing:" << history.dump();
  EXPECT_EQ(seen.back().status.value("phase", ""), "Running") << history.dump();
  if (writes == 1) return;
  EXPECT_EQ(seen.front().status.value("phase", ""), "Pending") << history.dump();
  const auto accepted = seen.front().at - before;
  EXPECT_GE(accepted, kAcceptedWindow) << "the accepted status was written before its window closed:" << history.dump();
  const auto paced_span = seen.back().at - before - kAcceptedWindow;
  EXPECT_LE(writes - 2, paced_span / kPodWindow)
      << "writes between Pending and Running were not paced:" << history.dump();
}

class OperatorRequestsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kBin + "kube-standin")) GTEST_SKIP() << "kube-standin not built";
    session_.start("torus-controller-e2e", standin_flags());
    // The chart's defaults: no client rate flags.
    // As the chart's ServiceAccount (RBAC enforced): a request the chart does not grant fails here too.
    const std::string operator_kubeconfig = chart_service_account_kubeconfig(session_.dir, session_.kubeconfig, kNs);
    operator_ = std::make_unique<Daemon>("operator",
                                         std::vector<std::string>{kBin + "torus", "operator", "--kubeconfig",
                                                                  operator_kubeconfig, "--metrics-addr", "127.0.0.1:0"},
                                         (session_.dir / "operator.log").string());
    // Synced: the operator watches jobs, pods, services, config maps, secrets and nodes.
    ASSERT_TRUE(eventually([&] { return stats().value("openWatches", 0) >= 6; }, 30s)) << stats().dump();
  }
  void TearDown() override {
    operator_.reset();
    session_.finish();
  }
  virtual std::vector<std::string> standin_flags() const { return {"--nodes", "8"}; }

  json control(const std::string& method, const std::string& endpoint, const json& body = nullptr) {
    auto transport = kube::make_http_transport(session_.config, {});
    kube::HttpResponse r =
        transport->send({method, "/_standin/" + endpoint, body.is_null() ? "" : body.dump(), "application/json", {}});
    EXPECT_EQ(r.status, 200) << endpoint << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }
  json stats() { return control("GET", "stats"); }

  json status_of(const std::string& name) {
    auto j = session_.client->try_get(res::kTrainingJobs, kNs, name);
    return j ? j->value("status", json::object()) : json::object();
  }

  void apply(const std::string& name, int workers) { create_from(name, job_yaml(name, workers)); }
  void create_from(const std::string& name, const std::string& yaml) {
    const std::string file = (session_.dir / (name + ".yaml")).string();
    std::ofstream(file) << yaml;
    const CmdResult r = run_command({kKubectl, "--kubeconfig", session_.kubeconfig, "-n", kNs, "create", "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }

  StandinSession session_;
  std::unique_ptr<Daemon> operator_;
};

int64_t count(const json& stats, const std::string& resource, const std::string& verb) {
  return stats.value("byResource", json::object()).value(resource, json::object()).value(verb, int64_t{0});
}

// 11 children (service, config map, secret, 8 pods) created once each and no event (the Created and Running
// conditions say it): nothing read live, nothing created twice. The status is written once, when the gang runs: the
// accepted status waits for it (up to kAcceptedWindow) and the pods' transitions are coalesced into it. A machine
// too loaded to start 8 pods in that window writes the accepted status when the window closes, then paced writes:
// the test then checks those rules instead (expect_paced_writes), so no window of its own decides the outcome.
TEST_F(OperatorRequestsE2E, AnEightWorkerJobReachesRunningInTwelveRequests) {
  StatusHistory history(session_.config, "octo");
  control("DELETE", "stats");
  const auto before = std::chrono::steady_clock::now();  // before the job exists, so before the operator's first pass
  apply("octo", 8);  // kubectl: discovery and the create, told apart below by resource
  const uint64_t mine_before = session_.client->requests_sent();
  ASSERT_TRUE(eventually([&] { return status_of("octo").value("phase", "") == "Running"; }, 60s))
      << status_of("octo").dump();
  const json s = stats();
  const int64_t my_gets = static_cast<int64_t>(session_.client->requests_sent() - mine_before);
  EXPECT_EQ(count(s, "pods", "create"), 8) << s.dump();
  EXPECT_EQ(count(s, "services", "create"), 1) << s.dump();
  EXPECT_EQ(count(s, "configmaps", "create"), 1) << s.dump();
  EXPECT_EQ(count(s, "secrets", "create"), 1) << s.dump();
  EXPECT_EQ(count(s, "events", "create"), 0) << s.dump();
  EXPECT_EQ(count(s, "trainingjobs.torus.dev", "get"), my_gets) << "the operator read the job live: " << s.dump();
  const int64_t writes = count(s, "trainingjobs.torus.dev/status", "update");
  expect_paced_writes(history, writes, before);
  int64_t operator_requests = 0;
  for (const char* r : {"pods", "services", "configmaps", "secrets", "events", "trainingjobs.torus.dev/status"}) {
    const json verbs = s["byResource"].value(r, json::object());
    for (const auto& [verb, n] : verbs.items()) operator_requests += n.get<int64_t>();
  }
  EXPECT_LE(operator_requests, 11 + writes) << s.dump();
  std::printf("requests from creation to Running: %lld, %lld of them status writes (%s)\n",
              static_cast<long long>(operator_requests), static_cast<long long>(writes),
              s["byResource"].dump().c_str());
}

// 20 conflicts in a row on the job's status writes: under the error backoff (5 ms doubling) the 20th retry would
// wait about 45 minutes; each conflict is retried from a fresh read instead, and the status catches up.
TEST_F(OperatorRequestsE2E, AStatusLeftStaleByConflictsIsRewrittenPromptly) {
  control("POST", "faults", {{"action", "conflict"}, {"resource", "trainingjobs.torus.dev"}, {"count", 20}});
  apply("storm", 2);
  ASSERT_TRUE(eventually(
      [&] {
        const json st = status_of("storm");
        return st.value("phase", "") == "Running" && st.value("workers", json::object()).value("active", 0) == 2;
      },
      60s))
      << status_of("storm").dump() << " " << stats().dump();
  EXPECT_GE(count(stats(), "trainingjobs.torus.dev/status", "update"), 21) << "the 20 conflicts were not all met";
}

// Pods that have not started: the accepted status is not held until the gang runs (only for its window, 3 s from
// the first pass), so `kubectl get` shows the job Pending, with its start time and Created condition, while the
// kubelet's start gate keeps the bound pods from starting; once the test opens the gate, Running. No clock is read:
// the gate stays shut until Pending is seen, so a status held for the gang could never show Pending.
class SlowGangE2E : public OperatorRequestsE2E {};

TEST_F(SlowGangE2E, AJobWhoseGangIsSlowIsShownPendingBeforeItsPodsStart) {
  StatusHistory history(session_.config, "slow");
  control("DELETE", "stats");
  const auto before = std::chrono::steady_clock::now();
  control("POST", "kubelet",
          {{"action", "holdStart"}, {"namespace", kNs}, {"labelSelector", "torus.dev/job-name=slow"}});
  apply("slow", 2);
  ASSERT_TRUE(eventually([&] { return status_of("slow").value("phase", "") == "Pending"; }, 30s))
      << status_of("slow").dump();
  const json pending = status_of("slow");
  EXPECT_TRUE(pending.contains("startTime")) << pending.dump();
  EXPECT_EQ(pending.value("conditions", json::array()).at(0).value("type", ""), "Created") << pending.dump();
  // The gang really had not started when Pending was shown: its pods are bound and still Pending.
  for (const char* pod : {"slow-worker-0", "slow-worker-1"}) {
    auto p = session_.client->try_get(res::kPods, kNs, pod);
    ASSERT_TRUE(p.has_value()) << pod;
    EXPECT_EQ(p->value("status", json::object()).value("phase", ""), "Pending") << p->dump();
  }
  // Held past the second the pods were made in (Kubernetes' timestamps have seconds), so the gang's scheduling
  // shows in the ledger: from the first creation to the last container start, as the pods' own timestamps say.
  const auto created =
      parse_time(session_.client->get(res::kPods, kNs, "slow-worker-0")["metadata"].value("creationTimestamp", ""));
  ASSERT_TRUE(created);
  ASSERT_TRUE(eventually([&] { return Clock::now() >= *created + 2s; }, 10s));
  control("POST", "kubelet", {{"action", "release"}, {"namespace", kNs}, {"labelSelector", ""}});
  ASSERT_TRUE(eventually([&] { return status_of("slow").value("phase", "") == "Running"; }, 60s))
      << status_of("slow").dump();
  std::optional<TimePoint> first_created, last_started;
  for (const char* name : {"slow-worker-0", "slow-worker-1"}) {
    const json pod = session_.client->get(res::kPods, kNs, name);
    const auto c = parse_time(pod["metadata"].value("creationTimestamp", ""));
    const auto st = parse_time(pod["status"]["containerStatuses"][0]["state"]["running"].value("startedAt", ""));
    ASSERT_TRUE(c && st) << pod.dump();
    first_created = first_created ? std::min(*first_created, *c) : *c;
    last_started = last_started ? std::max(*last_started, *st) : *st;
  }
  const double scheduling = status_of("slow").value("goodput", json::object()).value("schedulingSeconds", -1.0);
  EXPECT_GE(scheduling, 2.0) << status_of("slow").dump();
  EXPECT_DOUBLE_EQ(scheduling, std::chrono::duration<double>(*last_started - *first_created).count());
  const json s = stats();
  const int64_t writes = count(s, "trainingjobs.torus.dev/status", "update");
  EXPECT_GE(writes, 2) << "Pending, then Running: " << s.dump();
  expect_paced_writes(history, writes, before);
  EXPECT_EQ(count(s, "events", "create"), 0) << s.dump();
}

// A job its validation refuses (checkpoints on no volume that outlives the pods, with a restartPolicy that restarts)
// was never accepted and never had pods: no status it ever had, read through a watch opened before its creation (not
// only the last one), has a Created condition or says it was accepted; its Failed condition says why.
TEST_F(OperatorRequestsE2E, ARefusedJobIsNeverSaidToBeAccepted) {
  std::string yaml = job_yaml("refused", 2);
  yaml.erase(yaml.find(kCheckpointHostPath), kCheckpointHostPath.size());
  const std::string from = session_.client->list(res::kTrainingJobs, kNs)["metadata"]["resourceVersion"];
  std::mutex mu;
  std::vector<json> statuses;  // every status the job had, in order
  kube::StreamCancel cancel;
  std::thread watcher([&] {
    session_.client->watch(
        res::kTrainingJobs, kNs, {.resource_version = from},
        [&](kube::WatchEvent& e) {
          if (e.type == "BOOKMARK") return;
          std::lock_guard lock(mu);
          statuses.push_back(e.object.value("status", json::object()));
        },
        cancel);
  });
  create_from("refused", yaml);
  const bool failed = eventually(
      [&] {
        std::lock_guard lock(mu);
        return !statuses.empty() && statuses.back().value("phase", "") == "Failed";
      },
      60s);
  cancel.cancel();
  watcher.join();
  ASSERT_TRUE(failed) << status_of("refused").dump();
  std::string failure;
  for (const json& status : statuses) {
    for (const json& c : status.value("conditions", json::array())) {
      EXPECT_NE(c.value("type", ""), "Created") << status.dump();
      EXPECT_EQ(c.value("message", "").find("accepted"), std::string::npos) << status.dump();
      if (c.value("type", "") == "Failed") failure = c.value("reason", "") + ": " + c.value("message", "");
    }
  }
  EXPECT_EQ(failure.rfind("InvalidSpec: spec.training.checkpoint.dir: \"/ckpt\" is on no volume", 0), 0u) << failure;
  EXPECT_TRUE(session_.client->list(res::kPods, kNs)["items"].empty());
}

}  // namespace
}  // namespace torus::controller::e2e

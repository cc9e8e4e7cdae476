// The operator end to end: `kube-standin` (API stand-in + simulated kubelet) and `torus operator` as real
// processes, driven by the real kubectl for apply / get / wait / delete, as issue 5 lists.
#include "tests/operator/e2e_support.h"

namespace torus::controller {
namespace {

using namespace e2e;

TEST_F(OperatorE2E, JobCreatesServiceConfigMapSecretAndPods) {
  apply("alpha", 3);
  ASSERT_TRUE(eventually([] { return gang_running("alpha", 3, 0); })) << pods_of("alpha").size() << " pods";
  wait_phase("alpha", "Running");
  json j = *job("alpha");
  std::string uid = j["metadata"]["uid"];
  auto owned = [&](const json& o) {
    const json& ref = o["metadata"]["ownerReferences"][0];
    return ref["uid"] == uid && ref["controller"] == true && ref["kind"] == "TrainingJob";
  };
  EXPECT_TRUE(owned(client_->get(res::kServices, kNs, service_name("alpha"))));
  EXPECT_TRUE(owned(client_->get(res::kConfigMaps, kNs, config_map_name("alpha"))));
  EXPECT_TRUE(owned(client_->get(res::kSecrets, kNs, secret_name("alpha"))));
  std::set<std::string> ranks;
  for (const auto& pod : pods_of("alpha")) {
    EXPECT_TRUE(owned(pod)) << pod["metadata"]["name"];
    std::map<std::string, std::string> env;
    for (const auto& e : pod["spec"]["containers"][0]["env"]) env[e["name"]] = e.value("value", "<ref>");
    EXPECT_EQ(env["MASTER_ADDR"], "alpha-worker-0.alpha.default.svc");
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["TORUS_ATTEMPT"], "0");
    ranks.insert(env["RANK"]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  // kubectl sees the rank -> pod -> node map and readiness.
  CmdResult r =
      kubectl({"get", "trainingjob", "alpha", "-o", "jsonpath={.status.workers.ready} {.status.ranks[0].node}"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, 2), "3 ") << r.out;
}

// Rack ordering: the stand-in's nodes carry topology.torus.dev/rack; the job's ConfigMap gets their node -> rack
// map, the workers the variables that point at it, status.ranks each rank's rack; a relabelled node updates the map.
TEST_F(OperatorE2E, TopologyKeyMapsNodesToRacksForWorkersAndStatus) {
  const std::string key = "topology.torus.dev/rack";
  auto racks_of_nodes = [&] {
    std::map<std::string, std::string> racks;
    for (const auto& n : client_->list(res::kNodes, "").value("items", json::array())) {
      racks[n["metadata"]["name"]] = n["metadata"]["labels"].value(key, "");
    }
    return racks;
  };
  auto map_in_config_map = [] {
    auto cm = client_->try_get(res::kConfigMaps, kNs, config_map_name("tango"));
    if (!cm || !cm->value("data", json::object()).contains("topology-blocks.json")) return json();
    return json::parse((*cm)["data"]["topology-blocks.json"].get<std::string>(), nullptr, false);
  };
  const auto racks = racks_of_nodes();
  ASSERT_EQ(racks.size(), 8u);
  apply("tango", 3, "    topology:\n      key: " + key + "\n");
  ASSERT_TRUE(eventually([] { return gang_running("tango", 3, 0); })) << phase("tango");
  EXPECT_EQ(map_in_config_map(), json(racks));
  std::map<std::string, std::string> node_of_pod;
  for (const auto& pod : pods_of("tango")) {
    std::map<std::string, std::string> env;
    for (const auto& e : pod["spec"]["containers"][0]["env"]) env[e["name"]] = e.value("value", "<ref>");
    EXPECT_EQ(env["TORUS_TOPOLOGY_KEY"], key);
    EXPECT_EQ(env["TORUS_TOPOLOGY_BLOCKS_FILE"], "/etc/torus/job/topology-blocks.json");
    node_of_pod[pod["metadata"]["name"]] = pod["spec"]["nodeName"];
  }
  // What `kubectl get trainingjob -o yaml` shows: rank -> pod -> node -> rack.
  auto ranks_match = [&] {
    CmdResult r = kubectl({"get", "trainingjob", "tango", "-o", "json"});
    json j = json::parse(r.out, nullptr, false);
    if (r.code != 0 || j.is_discarded()) return false;
    json ranks = j.value("status", json::object()).value("ranks", json::array());
    if (ranks.size() != 3) return false;
    for (const auto& rank : ranks) {
      std::string node = rank.value("node", "");
      if (node_of_pod[rank.value("pod", "")] != node || rank.value("block", "") != racks.at(node)) return false;
    }
    return true;
  };
  EXPECT_TRUE(eventually(ranks_match)) << kubectl({"get", "trainingjob", "tango", "-o", "yaml"}).out;
  auto rack_condition = [] {
    for (const auto& c : job("tango")->value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "RackOrdering") return c.value("status", "") + "/" + c.value("reason", "");
    }
    return std::string();
  };
  EXPECT_EQ(rack_condition(), "True/BlockMapMounted");
  // A node relabelled later: the map follows (level-triggered), then the label is put back for the other tests.
  const std::string node = node_of_pod["tango-worker-0"];
  ASSERT_EQ(kubectl({"label", "node", node, key + "=rack-9", "--overwrite"}).code, 0);
  EXPECT_TRUE(eventually([&] { return map_in_config_map().value(node, "") == "rack-9"; })) << map_in_config_map();
  EXPECT_TRUE(eventually([&] {
    json ranks = job("tango")->value("status", json::object()).value("ranks", json::array());
    return !ranks.empty() && ranks[0].value("block", "") == "rack-9";
  }));
  ASSERT_EQ(kubectl({"label", "node", node, key + "=" + racks.at(node), "--overwrite"}).code, 0);
  EXPECT_TRUE(eventually([&] { return map_in_config_map() == json(racks); })) << map_in_config_map();
  ASSERT_EQ(kubectl({"delete", "trainingjob", "tango", "--wait=false"}).code, 0);
}

// The leader's /metrics, /healthz and /readyz (its port is printed on its first log line).
TEST_F(OperatorE2E, ServesMetricsHealthAndReadiness) {
  apply("papa", 1);
  ASSERT_TRUE(eventually([] { return gang_running("papa", 1, 0); }));
  std::string url;
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [id, op] : operators_) {
          std::ifstream log(dir_ / (id + ".log"));
          std::string line;
          while (std::getline(log, line)) {
            auto at = line.find("metrics on http://");
            if (at == std::string::npos) continue;
            url = line.substr(at + 11, line.find("/metrics", at) - at - 11);
            return true;
          }
        }
        return false;
      },
      10s));
  kube::ClusterConfig target;
  target.server = url;
  auto http = kube::make_http_transport(target, {});
  EXPECT_EQ(http->send({"GET", "/healthz", "", "text/plain", {}}).status, 200);
  EXPECT_TRUE(eventually([&] { return http->send({"GET", "/readyz", "", "text/plain", {}}).status == 200; }, 10s));
  std::string metrics = http->send({"GET", "/metrics", "", "text/plain", {}}).body;
  EXPECT_NE(metrics.find("torus_operator_reconciles_total"), std::string::npos);
  EXPECT_NE(metrics.find("torus_operator_leader 1"), std::string::npos) << metrics.substr(0, 2000);
  EXPECT_NE(metrics.find("torus_operator_api_requests_total{verb=\"POST\",code=\"201\"}"), std::string::npos);
}

// Gang scheduling: the coscheduling PodGroup (its CRD is installed on the stand-in) is created with the job's
// minAvailable and owned by it, so it goes with the job. The stand-in's scheduler serves that schedulerName here, as
// scheduler-plugins would (a pod of a name no scheduler serves stays Pending: the next test).
TEST_F(OperatorE2E, AGangSchedulerGetsAPodGroupOwnedByTheJob) {
  control("kubelet", {{"action", "serveScheduler"}, {"name", "scheduler-plugins-scheduler"}});
  apply("quebec", 3,
        "    schedulingPolicy:\n      schedulerName: scheduler-plugins-scheduler\n      minAvailable: 2\n");
  ASSERT_TRUE(eventually([] { return gang_running("quebec", 3, 0); })) << phase("quebec");
  CmdResult r = kubectl({"get", "podgroups.scheduling.x-k8s.io", "quebec", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.out;
  const json group = json::parse(r.out);
  EXPECT_EQ(group["spec"]["minMember"], 2);
  EXPECT_EQ(group["metadata"]["ownerReferences"][0]["uid"], job("quebec")->at("metadata").at("uid"));
  for (const auto& pod : pods_of("quebec")) {
    EXPECT_EQ(pod["spec"]["schedulerName"], "scheduler-plugins-scheduler");
    EXPECT_EQ(pod["metadata"]["labels"].value(std::string(kLabelPodGroup), ""), "quebec");
  }
  ASSERT_EQ(kubectl({"delete", "trainingjob", "quebec", "--wait=true", "--timeout=30s"}).code, 0);
  EXPECT_TRUE(eventually([] { return !client_->try_get(res::kCoschedulingPodGroups, kNs, "quebec"); }));
}

// A cluster without Volcano: its PodGroup kind is not served (a Warning event says so) and nothing schedules the
// gang's pods, which stay Pending with no node, as on a real cluster. The job says what they wait for and fails at its
// runningDeadlineSeconds instead of waiting silently.
TEST_F(OperatorE2E, AGangForAnUnservedSchedulerWaitsAndFailsAtItsRunningDeadline) {
  apply("romeo", 2,
        "    runningDeadlineSeconds: 2\n    schedulingPolicy:\n      schedulerName: volcano\n      queue: research\n");
  wait_phase("romeo", "Failed");
  const json status = job("romeo")->at("status");
  std::string messages;
  for (const json& c : status.value("conditions", json::array())) messages += c.value("message", "") + "\n";
  EXPECT_NE(messages.find("waiting for scheduler \"volcano\""), std::string::npos) << status.dump();
  for (const json& pod : pods_of("romeo")) EXPECT_EQ(pod["spec"].value("nodeName", ""), "") << pod.dump();
  auto warned = [] {
    const json events = client_->list(res::kEvents, kNs, {.field_selector = "involvedObject.name=romeo"});
    for (const auto& e : events.value("items", json::array())) {
      if (e.value("reason", "") == "PodGroupNotCreated" && e.value("type", "") == "Warning") return true;
    }
    return false;
  };
  EXPECT_TRUE(eventually(warned)) << kubectl({"get", "events", "--field-selector", "involvedObject.name=romeo"}).out;
  ASSERT_EQ(kubectl({"delete", "trainingjob", "romeo", "--wait=false"}).code, 0);
}

TEST_F(OperatorE2E, Exit137RestartsWholeGangAsAttempt1) {
  apply("bravo", 2);
  ASSERT_TRUE(eventually([] { return gang_running("bravo", 2, 0); }));
  std::set<std::string> first_uids;
  for (const auto& p : pods_of("bravo")) first_uids.insert(p["metadata"]["uid"]);
  terminate("bravo-worker-1", 137);
  ASSERT_TRUE(eventually([] { return gang_running("bravo", 2, 1); })) << phase("bravo");
  for (const auto& p : pods_of("bravo")) EXPECT_FALSE(first_uids.count(p["metadata"]["uid"])) << "pod not replaced";
  wait_phase("bravo", "Running");
  EXPECT_EQ(job("bravo")->at("status").value("restarts", 0), 1);
}

TEST_F(OperatorE2E, Exit1FailsTheJob) {
  apply("charlie", 2);
  ASSERT_TRUE(eventually([] { return gang_running("charlie", 2, 0); }));
  terminate("charlie-worker-0", 1);
  wait_phase("charlie", "Failed");
  EXPECT_EQ(failed_reason("charlie"), "WorkerFailed");
  // cleanPodPolicy Running (the default): the surviving worker is deleted.
  EXPECT_TRUE(eventually([] {
    for (const auto& p : pods_of("charlie")) {
      if (p.value("status", json::object()).value("phase", "") == "Running") return false;
    }
    return true;
  }));
}

TEST_F(OperatorE2E, BackoffLimitExhaustedFailsWithReason) {
  apply("delta", 1, "    backoffLimit: 1\n");
  ASSERT_TRUE(eventually([] { return gang_running("delta", 1, 0); }));
  terminate("delta-worker-0", 137);
  ASSERT_TRUE(eventually([] { return gang_running("delta", 1, 1); }));
  terminate("delta-worker-0", 137);
  wait_phase("delta", "Failed");
  EXPECT_EQ(failed_reason("delta"), "BackoffLimitExceeded");
}

TEST_F(OperatorE2E, SuspendAndResume) {
  apply("echo", 2);
  ASSERT_TRUE(eventually([] { return gang_running("echo", 2, 0); }));
  ASSERT_EQ(
      kubectl({"patch", "trainingjob", "echo", "--type=merge", "-p", R"({"spec":{"runPolicy":{"suspend":true}}})"})
          .code,
      0);
  wait_phase("echo", "Suspended");
  EXPECT_TRUE(eventually([] { return pods_of("echo").empty(); }));
  EXPECT_TRUE(client_->try_get(res::kConfigMaps, kNs, config_map_name("echo"))) << "suspend keeps the job's config";
  ASSERT_EQ(
      kubectl({"patch", "trainingjob", "echo", "--type=merge", "-p", R"({"spec":{"runPolicy":{"suspend":false}}})"})
          .code,
      0);
  // Resuming starts the next attempt (it mounts the spec of that moment); a suspension is no failure.
  ASSERT_TRUE(eventually([] { return gang_running("echo", 2, 1); }));
  wait_phase("echo", "Running");
  const json status = job("echo")->at("status");
  EXPECT_EQ(status.value("attempt", -1), 1) << status.dump();
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
}

TEST_F(OperatorE2E, ActiveDeadlineFailsTheJob) {
  apply("foxtrot", 1, "    activeDeadlineSeconds: 2\n");
  wait_phase("foxtrot", "Failed", 20s);
  EXPECT_EQ(failed_reason("foxtrot"), "DeadlineExceeded");
}

TEST_F(OperatorE2E, TtlDeletesFinishedJob) {
  apply("golf", 1, "    ttlSecondsAfterFinished: 1\n");
  ASSERT_TRUE(eventually([] { return gang_running("golf", 1, 0); }));
  terminate("golf-worker-0", 0);
  EXPECT_TRUE(eventually([] { return !job("golf"); }, 30s)) << "phase " << phase("golf");
}

// Issue 17.4: a finished job's worker counts stay as it ended once its finished pods are deleted (cleanPodPolicy All
// here; a kubectl delete of a pod alike).
TEST_F(OperatorE2E, FinishedJobKeepsItsWorkerCountsWhenItsPodsAreDeleted) {
  apply("golf-2", 2, "    cleanPodPolicy: All\n");
  ASSERT_TRUE(eventually([] { return gang_running("golf-2", 2, 0); }));
  terminate("golf-2-worker-0", 0);
  terminate("golf-2-worker-1", 0);
  wait_phase("golf-2", "Succeeded");
  ASSERT_TRUE(eventually([] { return pods_of("golf-2").empty(); })) << pods_of("golf-2").size() << " pods left";
  // A marker for "the operator has planned the job since its pods are gone": a stray pod of the job (another attempt,
  // so no worker count sees it) that cleanPodPolicy All deletes in such a pass.
  const json owner = job("golf-2")->at("metadata");
  json stray = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", "golf-2-stray"},
                  {"labels",
                   {{std::string(kLabelManagedBy), std::string(kManagedByValue)},
                    {std::string(kLabelJobName), "golf-2"},
                    {std::string(kLabelAttempt), "99"}}},
                  {"ownerReferences",
                   {{{"apiVersion", "torus.dev/v1alpha1"},
                     {"kind", "TrainingJob"},
                     {"name", "golf-2"},
                     {"uid", owner["uid"]},
                     {"controller", true}}}}}},
                {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  client_->create(res::kPods, kNs, stray);
  ASSERT_TRUE(eventually([] { return !client_->try_get(res::kPods, kNs, "golf-2-stray"); }))
      << "the operator never planned the finished job again";
  const json status = job("golf-2")->at("status");
  EXPECT_EQ(status["workers"].value("succeeded", 0), 2) << status.dump();
  EXPECT_EQ(status["workers"].value("active", -1), 0) << status.dump();
  EXPECT_EQ(status.value("attempt", -1), 0) << status.dump();
}

TEST_F(OperatorE2E, DeletionCascadesToChildren) {
  apply("hotel", 2);
  ASSERT_TRUE(eventually([] { return gang_running("hotel", 2, 0); }));
  ASSERT_EQ(kubectl({"delete", "trainingjob", "hotel", "--wait=true", "--timeout=30s"}).code, 0);
  EXPECT_TRUE(eventually([] {
    return pods_of("hotel").empty() && !client_->try_get(res::kServices, kNs, service_name("hotel")) &&
           !client_->try_get(res::kSecrets, kNs, secret_name("hotel"));
  })) << pods_of("hotel").size()
      << " pods left; service " << (client_->try_get(res::kServices, kNs, service_name("hotel")) ? "left" : "gone")
      << "; job " << phase("hotel");
}

TEST_F(OperatorE2E, OperatorKilledMidJobCreatesNoDuplicates) {
  apply("india", 3);
  ASSERT_TRUE(eventually([] { return gang_running("india", 3, 0); }));
  std::set<std::string> uids;
  for (const auto& p : pods_of("india")) uids.insert(p["metadata"]["uid"]);
  for (auto& [id, op] : operators_) op->kill(SIGKILL);
  operators_.clear();
  start_operator("op-c");
  ASSERT_TRUE(eventually([] { return lease_holder() == "op-c"; }, 30s)) << "holder " << lease_holder();
  apply("juliet", 1);  // proves the new replica acts
  ASSERT_TRUE(eventually([] { return gang_running("juliet", 1, 0); }));
  auto pods = pods_of("india");
  ASSERT_EQ(pods.size(), 3u);
  for (const auto& p : pods) EXPECT_TRUE(uids.count(p["metadata"]["uid"])) << "pod recreated after restart";
}

// Killed between its creates and the job's first status write (the accepted status waits for the gang): the next
// replica finds the children by their deterministic names, creates only the missing pods, and derives the start time
// from the first child made, not from its own first pass.
TEST_F(OperatorE2E, OperatorKilledMidCreationBeforeAnyStatusCreatesNoDuplicates) {
  // The first pod create is served (1 ms late), every later one is held for 10 minutes: the replica's pass stops
  // inside its creates, one pod made, whatever the machine's load, and the test kills it there.
  control("faults", {{"action", "delay"}, {"verb", "create"}, {"resource", "pods"}, {"milliseconds", 1}, {"count", 1}});
  control("faults",
          {{"action", "delay"}, {"verb", "create"}, {"resource", "pods"}, {"milliseconds", 600000}, {"count", -1}});
  apply("india-2", 4);
  ASSERT_TRUE(eventually([] { return !pods_of("india-2").empty(); }, 30s));
  ASSERT_EQ(pods_of("india-2").size(), 1u) << "not mid-creation";
  ASSERT_FALSE(job("india-2")->value("status", json::object()).contains("phase"))
      << "the accepted status was written at once";
  for (auto& [id, op] : operators_) op->kill(SIGKILL);
  operators_.clear();
  control("faults", {{"action", "clear"}});
  std::map<std::string, std::string> before;  // name -> uid, the pods the killed replica made
  for (const auto& p : pods_of("india-2")) before[p["metadata"]["name"]] = p["metadata"]["uid"];
  start_operator("op-d");
  ASSERT_TRUE(eventually([] { return gang_running("india-2", 4, 0); }, 30s));
  wait_phase("india-2", "Running");
  const auto pods = pods_of("india-2");
  EXPECT_EQ(pods.size(), 4u);
  for (const auto& p : pods) {
    auto it = before.find(p["metadata"]["name"]);
    if (it != before.end()) {
      EXPECT_EQ(it->second, p["metadata"]["uid"]) << "pod recreated after the kill";
    }
  }
  const json service = client_->get(res::kServices, kNs, service_name("india-2"));
  EXPECT_EQ((*job("india-2"))["status"]["startTime"], service["metadata"]["creationTimestamp"])
      << "the start time is the killed replica's first create";
}

TEST_F(OperatorE2E, TwoReplicasOneLeaderAndFailover) {
  // A leader whose lease lasts 60 s: a standby that takes over within the test's waits can only have been let in by
  // the lease's release. The suite's replicas go first (SIGKILL); their 5 s lease expires before op-long holds it.
  for (auto& [id, op] : operators_) op->kill(SIGKILL);
  operators_.clear();
  start_operator("op-long", 60s);
  ASSERT_TRUE(eventually([] { return lease_holder() == "op-long"; }, 30s)) << "holder " << lease_holder();
  const std::string leader = lease_holder();
  start_operator("op-standby");
  // The standby must not take over while the leader renews.
  apply("kilo", 1);
  ASSERT_TRUE(eventually([] { return gang_running("kilo", 1, 0); }));
  EXPECT_EQ(lease_holder(), leader);
  // Graceful stop of the leader releases the lease before it exits: the lease no longer names it (released, or
  // already the standby's), and the standby takes over without waiting out the 60 s.
  EXPECT_EQ(operators_[leader]->kill(SIGTERM), 0);
  operators_.erase(leader);
  EXPECT_NE(lease_holder(), leader) << "the leader exited still holding its lease";
  ASSERT_TRUE(eventually([] { return lease_holder() == "op-standby"; }, 30s)) << lease_holder();
  apply("lima", 2);
  ASSERT_TRUE(eventually([] { return gang_running("lima", 2, 0); }));
  // A leader that dies without releasing (SIGKILL) is replaced once its lease expires (5 s here).
  start_operator("op-standby-2");
  operators_["op-standby"]->kill(SIGKILL);
  operators_.erase("op-standby");
  ASSERT_TRUE(eventually([] { return lease_holder() == "op-standby-2"; }, 20s)) << lease_holder();
  apply("mike-2", 1);
  ASSERT_TRUE(eventually([] { return gang_running("mike-2", 1, 0); }));
}

TEST_F(OperatorE2E, ConvergesThroughFaults) {
  // 500s and 429s on pod creation, conflicts on status writes, dropped watches and a compacted history. The leader
  // counts the answers it got (torus_operator_api_requests_total by HTTP method and code): every fault below reached
  // it (a conflict may also be a real one, after the dropped watches: at least the five).
  // The suite's operators may have just started (each test runs in a process of its own): one of them leads first.
  ASSERT_TRUE(eventually([] { return operators_.count(lease_holder()) > 0; }, 30s)) << "holder " << lease_holder();
  const std::string leader = lease_holder();
  const auto answers = [&](const char* method, const char* code) {
    return operator_metric(leader, "torus_operator_api_requests_total",
                           {"verb=\"" + std::string(method) + "\"", "code=\"" + std::string(code) + "\""});
  };
  const double errors_before = answers("POST", "500"), throttled_before = answers("POST", "429");
  const double conflicts_before = answers("PUT", "409");
  ASSERT_GE(errors_before, 0) << "the leader's metrics cannot be read";
  control("faults", {{"action", "fail"}, {"verb", "create"}, {"resource", "pods"}, {"count", 4}, {"code", 500}});
  control("faults", {{"action", "fail"},
                     {"verb", "create"},
                     {"resource", "pods"},
                     {"count", 2},
                     {"code", 429},
                     {"retryAfterSeconds", 1}});
  control("faults", {{"action", "conflict"}, {"resource", "trainingjobs.torus.dev"}, {"count", 5}});
  for (const char* name : {"mike", "november", "oscar"}) apply(name, 3);
  control("faults", {{"action", "dropWatches"}});
  control("faults", {{"action", "compact"}});
  control("faults", {{"action", "dropWatches"}});
  for (const char* name : {"mike", "november", "oscar"}) {
    ASSERT_TRUE(eventually([&] { return gang_running(name, 3, 0); }, 60s)) << name << " " << pods_of(name).size();
    wait_phase(name, "Running");
  }
  EXPECT_EQ(answers("POST", "500") - errors_before, 4) << "the 500s on pod creation did not all reach the operator";
  EXPECT_EQ(answers("POST", "429") - throttled_before, 2) << "the 429s did not all reach the operator";
  EXPECT_GE(answers("PUT", "409") - conflicts_before, 5) << "the conflicts did not all reach the operator";
  terminate("november-worker-2", 137);
  control("faults", {{"action", "dropWatches"}});
  ASSERT_TRUE(eventually([] { return gang_running("november", 3, 1); }, 60s));
  // Never lost or duplicated: exactly the deterministic names, once each.
  for (const char* name : {"mike", "november", "oscar"}) {
    std::set<std::string> names;
    for (const auto& p : pods_of(name)) names.insert(p["metadata"]["name"]);
    EXPECT_EQ(names.size(), 3u) << name;
    EXPECT_TRUE(names.count(std::string(name) + "-worker-2")) << name;
  }
}

// Issue 27.5: after a storm of 409s on a job's status its finished gang is still reported: each conflict re-reads
// and is redone within the conflict backoff's 1 s cap, never the error backoff's (1000 s cap, far past the wait's
// deadline). The stand-in counts the status writes: all 10 conflicts were met, then one write went through.
TEST_F(OperatorE2E, AFinishedGangIsReportedWithinSecondsAfterAConflictStorm) {
  apply("sierra", 2);
  ASSERT_TRUE(eventually([] { return gang_running("sierra", 2, 0); }, 60s));
  wait_phase("sierra", "Running");
  auto transport = kube::make_http_transport(config_, {});
  ASSERT_EQ(transport->send({"DELETE", "/_standin/stats", "", "application/json", {}}).status, 200);
  control("faults", {{"action", "conflict"}, {"resource", "trainingjobs.torus.dev"}, {"count", 10}});
  for (const char* pod : {"sierra-worker-0", "sierra-worker-1"}) terminate(pod, 0);
  wait_phase("sierra", "Succeeded", 30s);
  const json stats = json::parse(transport->send({"GET", "/_standin/stats", "", "application/json", {}}).body);
  const json status_writes = stats["byResource"].value("trainingjobs.torus.dev/status", json::object());
  EXPECT_GE(status_writes.value("update", 0) + status_writes.value("patch", 0), 11)
      << "the 10 conflicts were not all met: " << stats.dump();
  control("faults", {{"action", "clear"}});
}

// An operator that watches namespaces a and b (`--namespace a,b`): one informer per namespace and kind, one work
// queue. It runs the jobs in a and b, never touches the one in c, and keeps its Lease in a (the first namespace).
class NamespacedOperatorE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kKubectl)) GTEST_SKIP() << "no kubectl at " << kKubectl;
    if (!fs::exists(kBin + "kube-standin")) GTEST_SKIP() << "kube-standin not built";
    session_.start("torus-operator-ns-e2e", {"--nodes", "4"});
    for (const char* ns : {"a", "b", "c"}) ASSERT_EQ(kubectl("default", {"create", "namespace", ns}).code, 0);
  }
  void TearDown() override {
    operator_.reset();
    session_.finish();
  }

  void start_operator(const std::vector<std::string>& namespace_flags) {
    std::vector<std::string> argv{kBin + "torus", "operator",       "--kubeconfig", kubeconfig_, "--metrics-addr",
                                  "127.0.0.1:0",  "--leader-elect", "--id",         "op-ns"};
    argv.insert(argv.end(), namespace_flags.begin(), namespace_flags.end());
    operator_ = std::make_unique<Daemon>("op-ns", argv, (dir_ / "operator.log").string());
  }

  CmdResult kubectl(const std::string& ns, std::vector<std::string> args) {
    args.insert(args.begin(), {kKubectl, "--kubeconfig", kubeconfig_, "--namespace", ns});
    return run_command(args);
  }

  void apply(const std::string& ns, const std::string& name, int workers) {
    const std::string file = (dir_ / (ns + "-" + name + ".yaml")).string();
    std::ofstream(file) << job_yaml(name, workers);
    const CmdResult r = kubectl(ns, {"apply", "-f", file});
    ASSERT_EQ(r.code, 0) << r.out;
  }

  void terminate(const std::string& ns, const std::string& pod, int code) {
    auto transport = kube::make_http_transport(config_, {});
    const json body = {{"action", "terminate"}, {"namespace", ns}, {"name", pod}, {"exitCode", code}};
    kube::HttpResponse r = transport->send({"POST", "/_standin/kubelet", body.dump(), "application/json", {}});
    ASSERT_EQ(r.status, 200) << body.dump() << ": " << r.body;
  }

  std::vector<json> pods_of(const std::string& ns, const std::string& job) {
    json list = client_->list(res::kPods, ns, {std::string(kLabelJobName) + "=" + job, "", ""});
    return list.value("items", json::array()).get<std::vector<json>>();
  }

  bool gang_running(const std::string& ns, const std::string& job, int workers, int attempt) {
    return all_running(pods_of(ns, job), workers, attempt);
  }

  void wait_phase(const std::string& ns, const std::string& name, const std::string& want) {
    const CmdResult r =
        kubectl(ns, {"wait", "--for=jsonpath={.status.phase}=" + want, "trainingjob/" + name, "--timeout=30s"});
    ASSERT_EQ(r.code, 0) << ns << "/" << name << " never reached " << want << ": " << r.out;
  }

  StandinSession session_;
  const fs::path& dir_ = session_.dir;
  const std::string& kubeconfig_ = session_.kubeconfig;
  const kube::ClusterConfig& config_ = session_.config;
  std::unique_ptr<kube::Client>& client_ = session_.client;
  std::unique_ptr<Daemon> operator_;
};

TEST_F(NamespacedOperatorE2E, WatchingAAndBRunsTheirJobsAndIgnoresC) {
  // The job in c exists before the operator starts and before the others, so by the time a's and b's jobs run, an
  // operator that saw c would have acted on it too.
  apply("c", "gamma", 1);
  start_operator({"--namespace", "a,b"});
  apply("a", "alpha", 2);
  apply("b", "beta", 1);
  ASSERT_TRUE(eventually([&] { return gang_running("a", "alpha", 2, 0); })) << pods_of("a", "alpha").size();
  ASSERT_TRUE(eventually([&] { return gang_running("b", "beta", 1, 0); })) << pods_of("b", "beta").size();
  wait_phase("a", "alpha", "Running");
  wait_phase("b", "beta", "Running");
  // Pod events of each namespace reach the shared queue: a killed worker in b restarts b's gang.
  terminate("b", "beta-worker-0", 137);
  ASSERT_TRUE(eventually([&] { return gang_running("b", "beta", 1, 1); })) << pods_of("b", "beta").size();
  wait_phase("b", "beta", "Running");

  EXPECT_TRUE(pods_of("c", "gamma").empty());
  const json gamma = client_->get(res::kTrainingJobs, "c", "gamma");
  EXPECT_FALSE(gamma.contains("status")) << gamma.dump();
  EXPECT_FALSE(client_->try_get(res::kConfigMaps, "c", config_map_name("gamma")));
  // The Lease defaults to the first watched namespace, as a single --namespace did.
  const auto lease = client_->try_get(res::kLeases, "a", "torus-operator");
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->value("spec", json::object()).value("holderIdentity", ""), "op-ns");
  EXPECT_FALSE(client_->try_get(res::kLeases, "default", "torus-operator"));
}

// An operator that may not list nodes (403, as RBAC without the nodes ClusterRole answers) warns once and runs jobs
// with a topology key without rack ordering.
TEST_F(NamespacedOperatorE2E, ForbiddenNodesMeanOneWarningAndNoRackOrdering) {
  auto transport = kube::make_http_transport(config_, {});
  const json fault = {{"action", "fail"}, {"verb", "list"}, {"resource", "nodes"}, {"count", 1}, {"code", 403}};
  ASSERT_EQ(transport->send({"POST", "/_standin/faults", fault.dump(), "application/json", {}}).status, 200);
  start_operator({"--namespace", "a"});
  const std::string file = (dir_ / "rack.yaml").string();
  std::ofstream(file) << job_yaml("rack", 2, "    topology:\n      key: topology.torus.dev/rack\n");
  ASSERT_EQ(kubectl("a", {"apply", "-f", file}).code, 0);
  ASSERT_TRUE(eventually([&] { return gang_running("a", "rack", 2, 0); })) << pods_of("a", "rack").size();
  for (const auto& pod : pods_of("a", "rack")) {
    for (const auto& e : pod["spec"]["containers"][0]["env"]) EXPECT_NE(e["name"], "TORUS_TOPOLOGY_BLOCKS_FILE");
  }
  const json cm = client_->get(res::kConfigMaps, "a", config_map_name("rack"));
  EXPECT_FALSE(cm["data"].contains("topology-blocks.json"));
  auto condition = [&] {
    for (const auto& c : client_->get(res::kTrainingJobs, "a", "rack")["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "RackOrdering") return c.value("status", "") + "/" + c.value("reason", "");
    }
    return std::string();
  };
  EXPECT_TRUE(eventually([&] { return condition() == "False/NodesNotReadable"; })) << condition();
  std::ifstream log(dir_ / "operator.log");
  std::string line;
  int warnings = 0;
  while (std::getline(log, line)) warnings += line.find("cannot list nodes") != std::string::npos;
  EXPECT_EQ(warnings, 1);
}

TEST_F(NamespacedOperatorE2E, RepeatedWatchNamespaceFlagsAreTheSameList) {
  // The Helm chart's form: one --watch-namespace=NS per namespace.
  start_operator({"--watch-namespace=a", "--watch-namespace=b"});
  apply("c", "gamma", 1);
  apply("b", "beta", 1);
  apply("a", "alpha", 1);
  ASSERT_TRUE(eventually([&] { return gang_running("a", "alpha", 1, 0); })) << pods_of("a", "alpha").size();
  ASSERT_TRUE(eventually([&] { return gang_running("b", "beta", 1, 0); })) << pods_of("b", "beta").size();
  wait_phase("a", "alpha", "Running");
  wait_phase("b", "beta", "Running");
  EXPECT_TRUE(pods_of("c", "gamma").empty());
  EXPECT_FALSE(client_->get(res::kTrainingJobs, "c", "gamma").contains("status"));
}

}  // namespace
}  // namespace torus::controller

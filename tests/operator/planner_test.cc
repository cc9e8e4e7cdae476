// Table-driven tests of the pure planner: (job, observed children, now) -> actions.
#include "operator/controller/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/api/defaults.h"
#include "operator/controller/children.h"
#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

struct Case {
  const char* name;
  PlanInput input;
  std::string phase;  // expected new phase, "<none>" when no status write
  std::vector<std::string> creates;
  std::vector<std::string> deletes;
  std::string failed_reason = "<none>";
};

class PlannerTable : public ::testing::TestWithParam<Case> {};

TEST_P(PlannerTable, Actions) {
  const Case& c = GetParam();
  Plan p = plan(c.input);
  EXPECT_EQ(p.invalid_spec, "") << c.name;
  EXPECT_EQ(phase_of(p, c.input), c.phase) << c.name;
  EXPECT_EQ(created_pods(p), c.creates) << c.name;
  EXPECT_EQ(deleted_pods(p), c.deletes) << c.name;
  if (c.failed_reason != "<none>" || c.phase == "Failed") {
    EXPECT_EQ(condition_reason(p, "Failed"), c.failed_reason) << c.name;
  }
}

const std::vector<std::string> kNone;

INSTANTIATE_TEST_SUITE_P(
    Gang, PlannerTable,
    ::testing::Values(
        Case{"new job creates every pod",
             with_children(JobBuilder().build(), {}, at(0)),
             "Pending",
             {"mnist-worker-0", "mnist-worker-1"},
             kNone},
        Case{"missing pod is created",
             with_children(JobBuilder().phase("Pending").build(), {PodBuilder("mnist", 0).build()}, at(1)),
             "Pending",
             {"mnist-worker-1"},
             kNone},
        Case{"all running -> Running",
             with_children(JobBuilder().phase("Pending").build(),
                           {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(5)),
             "Running", kNone, kNone},
        Case{"137 restarts the whole gang",
             with_children(JobBuilder().phase("Running").condition("Running", "True", 3).build(),
                           {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).exited(137).build()},
                           at(10)),
             "Restarting",
             kNone,
             {"mnist-worker-0", "mnist-worker-1"}},
        Case{"old attempt pods are deleted before new ones are created",
             with_children(JobBuilder().phase("Restarting", 1).build(),
                           {PodBuilder("mnist", 0, 0).running().build(), PodBuilder("mnist", 1, 0).exited(137).build()},
                           at(11)),
             "Restarting",
             kNone,
             {"mnist-worker-0", "mnist-worker-1"}},
        Case{"terminating pods block recreation",
             with_children(JobBuilder().phase("Restarting", 1).build(),
                           {PodBuilder("mnist", 0, 0).terminating().build()}, at(11)),
             "Restarting", kNone, kNone},
        Case{"attempt 1 pods are created once the old ones are gone",
             with_children(JobBuilder().phase("Restarting", 1).build(), {}, at(12)),
             "Restarting",
             {"mnist-worker-0", "mnist-worker-1"},
             kNone},
        Case{
            "exit 1 fails the job",
            with_children(JobBuilder().phase("Running").condition("Running", "True", 3).build(),
                          {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).exited(1).build()}, at(10)),
            "Failed",
            {},
            {"mnist-worker-0"},
            "WorkerFailed"},
        Case{"backoff limit exhausted",
             with_children(JobBuilder().backoff_limit(1).phase("Running", 1).condition("Running", "True", 3).build(),
                           {PodBuilder("mnist", 0, 1).running().build(), PodBuilder("mnist", 1, 1).exited(137).build()},
                           at(10)),
             "Failed",
             {},
             {"mnist-worker-0"},
             "BackoffLimitExceeded"},
        Case{"Never fails on a retryable code",
             with_children(JobBuilder().restart_policy("Never").phase("Running").build(),
                           {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).exited(137).build()},
                           at(10)),
             "Failed",
             {},
             {"mnist-worker-0"},
             "WorkerFailed"},
        Case{
            "all succeeded",
            with_children(JobBuilder().phase("Running").build(),
                          {PodBuilder("mnist", 0).exited(0).build(), PodBuilder("mnist", 1).exited(0).build()}, at(10)),
            "Succeeded", kNone, kNone},
        Case{
            "active deadline",
            with_children(JobBuilder().active_deadline(60).phase("Running").build(),
                          {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(61)),
            "Failed",
            {},
            {"mnist-worker-0", "mnist-worker-1"},
            "DeadlineExceeded"},
        Case{"gang timeout names unscheduled pods",
             with_children(JobBuilder().running_deadline(30).phase("Pending").build(),
                           {PodBuilder("mnist", 0).running().build(),
                            PodBuilder("mnist", 1).unschedulable("0/4 nodes have free nvidia.com/gpu").build()},
                           at(31)),
             "Failed",
             {},
             {"mnist-worker-0", "mnist-worker-1"},
             "GangTimeout"},
        Case{"a pod vanishing from a running gang restarts it",
             with_children(JobBuilder().phase("Running").condition("Running", "True", 3).build(),
                           {PodBuilder("mnist", 0).running().build()}, at(10)),
             "Restarting",
             kNone,
             {"mnist-worker-0"}},
        Case{
            "suspend deletes pods",
            with_children(JobBuilder().suspend(true).phase("Running").build(),
                          {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(10)),
            "Suspended",
            kNone,
            {"mnist-worker-0", "mnist-worker-1"}},
        Case{"resume recreates pods",
             with_children(JobBuilder().phase("Suspended").build(), {}, at(20)),
             "Pending",
             {"mnist-worker-0", "mnist-worker-1"},
             kNone},
        Case{"cleanPodPolicy All deletes finished pods",
             with_children(JobBuilder().clean_pod_policy("All").phase("Succeeded").completed_at(5).build(),
                           {PodBuilder("mnist", 0).exited(0).build()}, at(6)),
             "Succeeded",
             kNone,
             {"mnist-worker-0"}},
        Case{"cleanPodPolicy None keeps pods",
             with_children(JobBuilder().clean_pod_policy("None").phase("Failed").completed_at(5).build(),
                           {PodBuilder("mnist", 0).running().build()}, at(6)),
             "Failed", kNone, kNone},
        Case{"managedBy another controller: hands off",
             with_children(JobBuilder().managed_by("kueue.x-k8s.io/multikueue").build(), {}, at(0)), "<none>", kNone,
             kNone},
        Case{"deleting job: nothing (garbage collection)", with_children(JobBuilder().deleting().build(), {}, at(0)),
             "<none>", kNone, kNone}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      std::string n = param_info.param.name;
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

TEST(Planner, NewJobCreatesServiceConfigMapSecretWithOwnerRefs) {
  PlanInput in{JobBuilder().build(), {}, {}, {}, {}, at(0), "s3cret"};
  Plan p = plan(in);
  std::map<ChildKind, json> by_kind;
  for (const auto& c : p.creates) by_kind[c.kind] = c.object;
  ASSERT_EQ(by_kind.size(), 4u);
  EXPECT_EQ(by_kind[ChildKind::kService]["spec"]["clusterIP"], "None");
  EXPECT_EQ(by_kind[ChildKind::kSecret]["stringData"]["secret"], "s3cret");
  EXPECT_NE(by_kind[ChildKind::kConfigMap]["data"]["job.json"].get<std::string>().find("\"workers\": 2"),
            std::string::npos);
  for (const auto& c : p.creates) {
    const json& ref = c.object["metadata"]["ownerReferences"][0];
    EXPECT_EQ(ref["uid"], "uid-mnist");
    EXPECT_EQ(ref["kind"], "TrainingJob");
    EXPECT_EQ(ref["controller"], true);
    EXPECT_EQ(c.object["metadata"]["labels"][std::string(kLabelAttempt)], "0");
    EXPECT_EQ(c.object["metadata"]["labels"][std::string(kLabelJobName)], "mnist");
  }
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["startTime"], format_time(at(0)));
  EXPECT_EQ(condition_reason(p, "Created"), "JobCreated");
  EXPECT_TRUE(p.events.empty()) << "the Created condition says it: no event (a request per job)";
}

// The accepted status waits for the gang (StatusPacing), so the passes before it is written replan a job without a
// status: each must derive the same start time, the first child's creation, and none records an event. The gang's
// first write says both stories in its conditions, each with its own time.
TEST(Planner, AJobWithoutStatusStartsWhenItsFirstChildWasMadeAndRunsWithoutEvents) {
  json job = JobBuilder().build();
  Plan pending = plan(with_children(job, {PodBuilder("mnist", 0).build()}, at(2)));
  ASSERT_TRUE(pending.status);
  EXPECT_EQ((*pending.status)["startTime"], format_time(kT0)) << "the pod was created at kT0, not at this pass";
  EXPECT_TRUE(pending.events.empty());
  Plan running = plan(
      with_children(job, {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(5)));
  ASSERT_TRUE(running.status);
  EXPECT_EQ((*running.status)["phase"], "Running");
  EXPECT_EQ((*running.status)["startTime"], format_time(kT0));
  EXPECT_TRUE(running.events.empty()) << "the Running condition says it: no GangRunning event";
  std::map<std::string, json> conditions;
  for (const auto& c : (*running.status)["conditions"]) conditions[c["type"]] = c;
  EXPECT_EQ(conditions["Created"]["lastTransitionTime"], format_time(kT0));
  EXPECT_NE(conditions["Created"]["message"].get<std::string>().find("2 worker pods"), std::string::npos);
  EXPECT_EQ(conditions["Running"]["lastTransitionTime"], format_time(at(5)));
  EXPECT_EQ(conditions["Running"]["message"], "all 2 workers of attempt 0 are running");
}

TEST(Planner, WorkerPodCarriesRankEnvironment) {
  Plan p = plan(with_children(JobBuilder().workers(4).build(), {}, at(0)));
  ASSERT_EQ(created_pods(p).size(), 4u) << p.invalid_spec;
  const json& pod = p.creates[2].object;
  auto env = env_of(pod);
  EXPECT_EQ(env["MASTER_ADDR"], "mnist-worker-0.mnist.team.svc");
  EXPECT_EQ(env["MASTER_PORT"], std::to_string(api::kDefaultRendezvousPort));
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["NODE_RANK"], "2");
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "1");
  EXPECT_EQ(env["TORUS_ATTEMPT"], "0");
  EXPECT_EQ(env["TORUS_JOB_NAME"], "mnist");
  EXPECT_EQ(env["TORUS_NODE_NAME"], "<spec.nodeName>");
  EXPECT_EQ(env["TORUS_RENDEZVOUS_SECRET_FILE"], "/etc/torus/rendezvous/secret");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["subdomain"], "mnist");
  EXPECT_EQ(pod["spec"]["hostname"], "mnist-worker-2");
}

TEST(Planner, GpuWorkersAskForGpusAndOnePodPerNode) {
  // gpus(8): gang.device gpu with 8 processes per worker.
  Plan p = plan(with_children(JobBuilder().gpus(8).build(), {}, at(0)));
  ASSERT_FALSE(created_pods(p).empty());
  const json& pod = p.creates[0].object;
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
  auto env = env_of(pod);
  EXPECT_EQ(env["WORLD_SIZE"], "16");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "8");
  EXPECT_EQ(env.count("RANK"), 0u) << "multi-process pods set RANK per local process";
  const json& anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(anti["topologyKey"], "kubernetes.io/hostname");
}

TEST(Planner, TopologyAndGangScheduling) {
  // topology.key names the rack label, topology.placement Required keeps the gang in one rack (podAffinity).
  Plan p = plan(with_children(
      JobBuilder().topology("topology.torus.dev/rack", "Required").scheduler("volcano", "pg-1").build(), {}, at(0)));
  const json& pod = p.creates[0].object;
  EXPECT_EQ(pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
            "topology.torus.dev/rack");
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(pod["metadata"]["labels"][std::string(kLabelPodGroup)], "pg-1");
}

// The PodGroup a gang scheduler needs: created before the pods, by kind of scheduler, with minMember from
// minAvailable (default: every worker); none without a scheduler or when the user names their own group.
TEST(Planner, GangSchedulersGetTheirPodGroupBeforeThePods) {
  struct GroupCase {
    const char* name;
    json policy;
    const char* api_version;  // "" : no PodGroup
    int min_member;
    json extra;  // fields of the PodGroup's spec besides minMember
  };
  const std::vector<GroupCase> cases = {
      {"no scheduler", json::object(), "", 0, json::object()},
      {"coscheduling",
       {{"schedulerName", "scheduler-plugins-scheduler"}},
       "scheduling.x-k8s.io/v1alpha1",
       4,
       json::object()},
      {"volcano, queue, priority, minAvailable",
       {{"schedulerName", "volcano"}, {"queue", "research"}, {"priorityClass", "high"}, {"minAvailable", 3}},
       "scheduling.volcano.sh/v1beta1",
       3,
       {{"queue", "research"}, {"priorityClassName", "high"}}},
      {"the user's own group", {{"schedulerName", "volcano"}, {"podGroup", "shared"}}, "", 0, json::object()},
  };
  for (const GroupCase& c : cases) {
    SCOPED_TRACE(c.name);
    Plan p = plan(with_children(JobBuilder().workers(4).scheduling(c.policy).build(), {}, at(0)));
    std::vector<const CreateAction*> groups;
    for (const auto& a : p.creates)
      if (a.kind == ChildKind::kPodGroup) groups.push_back(&a);
    ASSERT_EQ(created_pods(p).size(), 4u);
    if (std::string(c.api_version).empty()) {
      EXPECT_TRUE(groups.empty());
      continue;
    }
    ASSERT_EQ(groups.size(), 1u);
    const json& group = groups[0]->object;
    EXPECT_EQ(group["apiVersion"], c.api_version);
    EXPECT_EQ(group["metadata"]["name"], "mnist");
    EXPECT_EQ(group["metadata"]["ownerReferences"][0]["uid"], "uid-mnist");
    json want = c.extra;
    want["minMember"] = c.min_member;
    EXPECT_EQ(group["spec"], want);
    const auto group_at = std::find_if(p.creates.begin(), p.creates.end(),
                                       [](const CreateAction& a) { return a.kind == ChildKind::kPodGroup; });
    const auto first_pod = std::find_if(p.creates.begin(), p.creates.end(),
                                        [](const CreateAction& a) { return a.kind == ChildKind::kPod; });
    EXPECT_LT(group_at - p.creates.begin(), first_pod - p.creates.begin()) << "the PodGroup must precede its pods";
    EXPECT_EQ(first_pod->object["metadata"]["labels"][std::string(kLabelPodGroup)], "mnist");
  }
  // A running gang needs no create at all, PodGroup included.
  const json job = JobBuilder().workers(2).scheduling({{"schedulerName", "volcano"}}).phase("Running", 1).build();
  Plan steady = plan(
      with_children(job, {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).running().build()}, at(10)));
  for (const auto& a : steady.creates) EXPECT_NE(a.kind, ChildKind::kPodGroup);
}

// Issue 27.4: a 2 x 4 GPU job's pods share memory through a memory-backed /dev/shm, and every local rank's /metrics
// port is named on the pod and the Service (local rank k on metricsPort + k).
TEST(Planner, MultiProcessPodsGetAMemoryShmAndOneMetricsPortPerLocalRank) {
  json job = JobBuilder().gpus(4).build();
  job["spec"]["metricsPort"] = 9100;
  job["spec"]["training"]["batchSize"] = 64;
  PlanInput in = with_children(job, {}, at(0));
  in.services.clear();
  const Plan p = plan(in);
  std::vector<json> pods;
  json service;
  for (const auto& c : p.creates) {
    if (c.kind == ChildKind::kPod) pods.push_back(c.object);
    if (c.kind == ChildKind::kService) service = c.object;
  }
  ASSERT_EQ(pods.size(), 2u);
  const json expected_ports = {{{"name", "rendezvous"}, {"containerPort", 29500}},
                               {{"name", "metrics"}, {"containerPort", 9100}},
                               {{"name", "metrics-1"}, {"containerPort", 9101}},
                               {{"name", "metrics-2"}, {"containerPort", 9102}},
                               {{"name", "metrics-3"}, {"containerPort", 9103}}};
  for (const json& pod : pods) {
    const json& worker = pod["spec"]["containers"][0];
    EXPECT_EQ(worker["ports"], expected_ports);
    json shm;
    for (const json& v : pod["spec"]["volumes"]) {
      if (v["name"] == "torus-shm") shm = v;
    }
    EXPECT_EQ(shm, (json{{"name", "torus-shm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "4096Mi"}}}}));
    EXPECT_NE(worker["volumeMounts"].dump().find(R"({"mountPath":"/dev/shm","name":"torus-shm"})"), std::string::npos)
        << worker["volumeMounts"].dump();
  }
  ASSERT_TRUE(service.is_object());
  EXPECT_EQ(service["spec"]["ports"].size(), 5u);
  EXPECT_EQ(service["spec"]["ports"][4], (json{{"name", "metrics-3"}, {"port", 9103}}));
  // One process per pod: no shared memory to size, one metrics port.
  const Plan single = plan(with_children(JobBuilder().build(), {}, at(0)));
  for (const auto& c : single.creates) {
    if (c.kind != ChildKind::kPod) continue;
    EXPECT_EQ(c.object["spec"]["containers"][0]["ports"].size(), 2u);
    EXPECT_EQ(c.object["spec"]["volumes"].dump().find("torus-shm"), std::string::npos);
  }
}

TEST(Planner, UserTemplateIsMergedButGangFieldsWin) {
  json worker = {{"name", "worker"}, {"env", json::array({{{"name", "EXTRA"}, {"value", "1"}}})}};
  json tmpl = {
      {"metadata", {{"labels", {{"team", "vision"}}}}},
      {"spec",
       {{"nodeSelector", {{"pool", "a100"}}}, {"restartPolicy", "Always"}, {"containers", json::array({worker})}}}};
  Plan p = plan(with_children(JobBuilder().pod_template(tmpl).build(), {}, at(0)));
  const json& pod = p.creates[0].object;
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["pool"], "a100");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  auto env = env_of(pod);
  EXPECT_EQ(env["EXTRA"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
}

TEST(Planner, RestartBumpsAttemptAndRecordsCause) {
  Plan p = plan(with_children(JobBuilder().phase("Running").condition("Running", "True", 3).build(),
                              {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).exited(137).build()},
                              at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["attempt"], 1);
  EXPECT_EQ((*p.status)["restarts"], 1);
  EXPECT_EQ(condition_reason(p, "Restarting"), "RetryableFailure");
  ASSERT_FALSE(p.events.empty());
  EXPECT_EQ(p.events.back().type, EventType::kWarning);
  EXPECT_NE(p.events.back().message.find("mnist-worker-1 exited with code 137"), std::string::npos);
}

// Disruptions (issue: evictions must not spend backoffLimit). The DisruptionTarget condition of a pod that is gone,
// as the controller last saw it (in.gone_pods), charges the restart to the disruption.
PlanInput disrupted_gang(json job, std::vector<json> pods, std::vector<json> gone, TimePoint now) {
  PlanInput in = with_children(std::move(job), std::move(pods), now);
  in.gone_pods = objects_of(std::move(gone));
  return in;
}

TEST(Planner, AWorkerGoneAfterItsDisruptionRestartsTheGangWithoutSpendingBackoff) {
  const Plan p =
      plan(disrupted_gang(JobBuilder().backoff_limit(0).phase("Running").condition("Running", "True", 3).build(),
                          {PodBuilder("mnist", 0).running("node-0").build()},
                          {PodBuilder("mnist", 1).running("node-1").disrupted(8).build()}, at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["phase"], "Restarting");
  EXPECT_EQ((*p.status)["attempt"], 1);
  EXPECT_EQ((*p.status)["restarts"], 0);
  EXPECT_EQ((*p.status)["disruptions"], 1);
  EXPECT_EQ(condition_reason(p, "Restarting"), "Disrupted");
  EXPECT_EQ(deleted_pods(p), std::vector<std::string>{"mnist-worker-0"});
  ASSERT_EQ(p.events.size(), 1u);
  EXPECT_EQ(p.events[0].type, EventType::kNormal);
  EXPECT_EQ(p.events[0].reason, "Disrupted");
  EXPECT_EQ(p.events[0].message,
            "mnist-worker-1 on node node-1 was disrupted: EvictionByEvictionAPI (Eviction API: evicting); restarting "
            "the gang as attempt 1 from its checkpoint (a disruption, not a failure: restarts and backoffLimit "
            "unchanged)");
}

// The disrupted worker's peers agree to stop with it (or lose it in a collective) and exit retryable after it.
TEST(Planner, APeerThatExitedAfterTheDisruptionFollowsIt) {
  const Plan p =
      plan(disrupted_gang(JobBuilder().backoff_limit(0).phase("Running").condition("Running", "True", 3).build(),
                          {PodBuilder("mnist", 0).running().exited(42, "Error").finished_at(9).build()},
                          {PodBuilder("mnist", 1).running("node-1").disrupted(8).build()}, at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["restarts"], 0);
  EXPECT_EQ((*p.status)["disruptions"], 1);
  EXPECT_NE(p.events.at(0).message.find("1 peer stopped after it"), std::string::npos) << p.events[0].message;
}

// A kubelet's eviction (node pressure, TerminationByKubelet) leaves the pod Failed with its condition, not deleted.
TEST(Planner, AFailedPodThatCarriesItsDisruptionIsOne) {
  const Plan p = plan(with_children(
      JobBuilder().backoff_limit(0).phase("Running").condition("Running", "True", 3).build(),
      {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1)
                                                     .running("node-1")
                                                     .disrupted(7, "TerminationByKubelet", "node pressure")
                                                     .exited(137)
                                                     .build()},
      at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["restarts"], 0);
  EXPECT_EQ((*p.status)["disruptions"], 1);
  EXPECT_NE(p.events.at(0).message.find("was disrupted: TerminationByKubelet (node pressure)"), std::string::npos)
      << p.events[0].message;
}

TEST(Planner, AFailureBeforeTheDisruptionSpendsBackoff) {
  const Plan p =
      plan(disrupted_gang(JobBuilder().backoff_limit(1).phase("Running").condition("Running", "True", 3).build(),
                          {PodBuilder("mnist", 0).running().exited(137).finished_at(5).build()},
                          {PodBuilder("mnist", 1).running("node-1").disrupted(8).build()}, at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["restarts"], 1);
  EXPECT_EQ((*p.status)["disruptions"], 0);
  EXPECT_EQ(condition_reason(p, "Restarting"), "RetryableFailure");
  EXPECT_EQ(p.events.at(0).type, EventType::kWarning);
}

// Without a condition, a vanished pod counts as killed, as before (a plain `kubectl delete pod` has none in
// Kubernetes either); a gone pod of an earlier attempt (same name) is no excuse for this one.
TEST(Planner, AVanishedPodWithoutItsConditionThisAttemptCountsAsKilled) {
  for (const std::vector<json>& gone :
       {std::vector<json>{}, std::vector<json>{PodBuilder("mnist", 1, 0).running().disrupted(2).build()},
        std::vector<json>{PodBuilder("mnist", 1, 1).running().build()}}) {
    const Plan p =
        plan(disrupted_gang(JobBuilder().backoff_limit(3).phase("Running", 1).condition("Running", "True", 3).build(),
                            {PodBuilder("mnist", 0, 1).running().build()}, gone, at(10)));
    ASSERT_TRUE(p.status);
    EXPECT_EQ((*p.status)["restarts"], 2) << json(gone).dump();
    EXPECT_EQ((*p.status)["disruptions"], 0) << json(gone).dump();
    EXPECT_EQ(condition_reason(p, "Restarting"), "RetryableFailure");
  }
}

// The survivor's last words say the step the failed attempt reached: status.goodput's last step becomes it, so the
// next attempt's lost work counts from there, not from the last progress reading (issue 31.1).
TEST(Planner, ARestartTakesTheStepTheSurvivorsReachedFromTheirLastWords) {
  json job = JobBuilder().phase("Running").condition("Running", "True", 3).build();
  job["status"]["goodput"] = {{"attempt", 0}, {"lastStep", 40}, {"stepSeconds", 0.1}};
  json survivor = PodBuilder("mnist", 0).exited(42, "Error").build();
  survivor["status"]["containerStatuses"][0]["state"]["terminated"]["message"] =
      "CollectiveFailed: collective all_reduce #57 failed on rank 0: peer closed\n"
      "@torus-event {\"event\":\"aborted\",\"rank\":0,\"step\":56}";
  Plan p = plan(with_children(job, {survivor, PodBuilder("mnist", 1).exited(137).build()}, at(10)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["attempt"], 1);
  EXPECT_EQ((*p.status)["goodput"]["lastStep"], 56);
  EXPECT_NE(p.events.back().message.find("peer closed"), std::string::npos) << "the reason is still quoted";
  EXPECT_EQ(p.events.back().message.find("@torus-event"), std::string::npos) << "the postscript is not";
}

// The gang's start adds its scheduling to the ledger once: from the first pod's creation to the last container's
// start (issue 31.1); a pass of a gang already Running adds nothing.
TEST(Planner, TheGangsStartAddsItsSchedulingTimeOnce) {
  auto started = [](int index, int seconds) {
    json pod = PodBuilder("mnist", index).running().build();
    pod["status"]["containerStatuses"] = {
        {{"name", "worker"}, {"state", {{"running", {{"startedAt", format_time(at(seconds))}}}}}}};
    return pod;
  };
  json job = JobBuilder().phase("Pending").build();
  job["status"]["goodput"] = {{"schedulingSeconds", 1.0}};  // an earlier attempt's
  Plan p = plan(with_children(job, {started(0, 2), started(1, 5)}, at(6)));
  ASSERT_TRUE(p.status);
  EXPECT_EQ((*p.status)["phase"], "Running");
  EXPECT_DOUBLE_EQ((*p.status)["goodput"]["schedulingSeconds"].get<double>(), 6.0);
  json running = JobBuilder().phase("Running").condition("Running", "True", 5).build();
  running["status"]["goodput"] = {{"schedulingSeconds", 6.0}};
  Plan again = plan(with_children(running, {started(0, 2), started(1, 5)}, at(7)));
  if (again.status) {
    EXPECT_DOUBLE_EQ((*again.status)["goodput"]["schedulingSeconds"].get<double>(), 6.0);
  }
}

// One numbering, 0-based: status.attempt, the pod label, TORUS_ATTEMPT and the events say the same number.
TEST(Planner, AttemptOnePodsAreLabelledAttemptOne) {
  Plan p = plan(with_children(JobBuilder().phase("Restarting", 1).build(), {}, at(12)));
  ASSERT_EQ(created_pods(p).size(), 2u);
  EXPECT_EQ(p.creates[0].object["metadata"]["labels"][std::string(kLabelAttempt)], "1");
  EXPECT_EQ(env_of(p.creates[0].object)["TORUS_ATTEMPT"], "1");
  Plan running = plan(with_children(
      JobBuilder().phase("Restarting", 1).build(),
      {PodBuilder("mnist", 0, 1).running().build(), PodBuilder("mnist", 1, 1).running().build()}, at(13)));
  ASSERT_TRUE(running.status);
  EXPECT_EQ((*running.status)["attempt"], 1);
  ASSERT_FALSE(running.events.empty());
  EXPECT_EQ(running.events.back().message, "all 2 workers of attempt 1 are running");
}

TEST(Planner, GangTimeoutMessageNamesThePod) {
  Plan p = plan(with_children(
      JobBuilder().running_deadline(30).phase("Pending").build(),
      {PodBuilder("mnist", 0).running().build(), PodBuilder("mnist", 1).unschedulable("0/4 nodes available").build()},
      at(31)));
  ASSERT_TRUE(p.status);
  std::string message;
  for (const auto& c : (*p.status)["conditions"]) {
    if (c["type"] == "Failed") message = c["message"];
  }
  EXPECT_NE(message.find("mnist-worker-1 (Unschedulable: 0/4 nodes available)"), std::string::npos) << message;
}

TEST(Planner, DeadlinesRequeue) {
  // runningDeadlineSeconds 30 is the nearer deadline at t=10: the job is looked at again 20 s later.
  Plan p = plan(with_children(JobBuilder().running_deadline(30).active_deadline(100).phase("Pending").build(),
                              {PodBuilder("mnist", 0).build(), PodBuilder("mnist", 1).build()}, at(10)));
  ASSERT_TRUE(p.requeue_after);
  EXPECT_EQ(*p.requeue_after, std::chrono::seconds(20));
}

TEST(Planner, TtlDeletesTheJobOnceExpired) {
  Plan before = plan(with_children(JobBuilder().ttl(60).phase("Succeeded").completed_at(100).build(), {}, at(130)));
  EXPECT_EQ(before.job_action, Plan::JobAction::kKeep);
  ASSERT_TRUE(before.requeue_after);
  EXPECT_EQ(*before.requeue_after, std::chrono::seconds(30));
  Plan after = plan(with_children(JobBuilder().ttl(60).phase("Succeeded").completed_at(100).build(), {}, at(160)));
  EXPECT_EQ(after.job_action, Plan::JobAction::kDelete);
}

TEST(Planner, RankMapInStatus) {
  Plan p = plan(with_children(
      JobBuilder().phase("Pending").build(),
      {PodBuilder("mnist", 1).running("node-b").build(), PodBuilder("mnist", 0).running("node-a").build()}, at(5)));
  ASSERT_TRUE(p.status);
  const json& ranks = (*p.status)["ranks"];
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]["rank"], 0);
  EXPECT_EQ(ranks[0]["pod"], "mnist-worker-0");
  EXPECT_EQ(ranks[0]["node"], "node-a");
  EXPECT_EQ(ranks[1]["node"], "node-b");
  EXPECT_EQ((*p.status)["workers"]["ready"], 2);
}

// A child the server refused for good (422) fails the job with a reason and a Warning event; nothing is created,
// and the running pods go (cleanPodPolicy Running).
TEST(Planner, AChildRefusedForGoodFailsTheJob) {
  PlanInput in =
      with_children(JobBuilder().phase("Pending").build(), {PodBuilder("mnist", 0).running().build()}, at(5));
  in.refused_child = RefusedChild{ChildKind::kPod, "mnist-worker-1", 422,
                                  "Pod \"mnist-worker-1\" is invalid: spec.containers[1].image: Required value"};
  Plan p = plan(in);
  EXPECT_EQ(phase_of(p, in), "Failed");
  EXPECT_EQ(condition_reason(p, "Failed"), "InvalidSpec");
  EXPECT_TRUE(created_pods(p).empty());
  EXPECT_EQ(deleted_pods(p), (std::vector<std::string>{"mnist-worker-0"}));
  ASSERT_FALSE(p.events.empty());
  EXPECT_EQ(p.events.back().type, EventType::kWarning);
  EXPECT_EQ(p.events.back().reason, "InvalidSpec");
  EXPECT_EQ(p.events.back().message,
            "the API server refused to create Pod mnist-worker-1 (422): Pod \"mnist-worker-1\" is invalid: "
            "spec.containers[1].image: Required value");
}

// A finished job's succeeded/failed counts never shrink: cleanPodPolicy All deletes the finished pods after the
// pass that finished the job, and the job still says both workers succeeded, where they ran.
TEST(Planner, FinishedJobKeepsItsWorkerCountsWhenPodsAreDeleted) {
  json job = JobBuilder().clean_pod_policy("All").phase("Running").condition("Running", "True", 3).build();
  std::vector<json> pods = {PodBuilder("mnist", 0).running("n0").exited(0).build(),
                            PodBuilder("mnist", 1).running("n1").exited(0).build()};
  Plan done = plan(with_children(job, pods, at(10)));
  ASSERT_TRUE(done.status);
  EXPECT_EQ((*done.status)["phase"], "Succeeded");
  EXPECT_EQ((*done.status)["workers"]["succeeded"], 2);
  EXPECT_EQ(deleted_pods(done), (std::vector<std::string>{"mnist-worker-0", "mnist-worker-1"}));
  job["status"] = *done.status;
  for (const auto& remaining : {std::vector<json>{pods[1]}, std::vector<json>{}}) {
    Plan later = plan(with_children(job, remaining, at(11)));
    const json status = later.status ? *later.status : job["status"];
    EXPECT_EQ(status["workers"]["succeeded"], 2) << remaining.size() << " pods left";
    EXPECT_EQ(status["ranks"].size(), 2u) << remaining.size() << " pods left";
  }
}

TEST(Planner, SteadyStateWritesNothing) {
  json job = JobBuilder().phase("Running").condition("Running", "True", 3).build();
  std::vector<json> pods = {PodBuilder("mnist", 0).running("n0").build(), PodBuilder("mnist", 1).running("n1").build()};
  Plan first = plan(with_children(job, pods, at(10)));
  ASSERT_TRUE(first.status);  // worker counts and ranks filled in
  job["status"] = *first.status;
  Plan second = plan(with_children(job, pods, at(11)));
  EXPECT_FALSE(second.status) << second.status->dump();
  EXPECT_TRUE(second.creates.empty());
  EXPECT_TRUE(second.deletes.empty());
}

}  // namespace
}  // namespace torus::controller

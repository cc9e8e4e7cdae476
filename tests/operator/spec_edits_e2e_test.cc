// Spec edits, admission and refused children against the stand-in with the real kubectl and `torus operator`
// (issue 17 points 1 and 2, issue 13 part 3): a running gang's shape edited both ways becomes a new attempt from the
// last checkpoint, never a failure; a name that cannot make a Service is refused at admission; a child the server
// refuses for good fails the job with a condition and a Warning event.
#include "tests/operator/e2e_support.h"

namespace torus::controller {
namespace {

using namespace e2e;

class SpecEditsE2E : public OperatorE2E {
 protected:
  static std::vector<json> events_of(const std::string& name) {
    const json list = client_->list(res::kEvents, kNs, {.field_selector = "involvedObject.name=" + name});
    return list.value("items", json::array()).get<std::vector<json>>();
  }
  static bool has_event(const std::string& name, const std::string& type, const std::string& reason,
                        const std::string& text) {
    for (const auto& e : events_of(name)) {
      if (e.value("type", "") == type && e.value("reason", "") == reason &&
          e.value("message", "").find(text) != std::string::npos)
        return true;
    }
    return false;
  }
  static std::string env_value(const json& pod, const std::string& name) {
    for (const auto& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == name) return e.value("value", "<ref>");
    }
    return "<unset>";
  }
  static json job_file(const std::string& name) {
    const json cm = client_->get(res::kConfigMaps, kNs, config_map_name(name));
    return json::parse(cm["data"]["job.json"].get<std::string>());
  }
  static CmdResult patch(const std::string& name, const json& body) {
    return kubectl({"patch", "trainingjob", name, "--type=merge", "-p", body.dump()});
  }
  // Every pod of the running attempt reads `workers` in WORLD_SIZE, and the job file they mount says the same.
  static void expect_shape(const std::string& name, int workers, int attempt) {
    for (const auto& pod : pods_of(name)) EXPECT_EQ(env_value(pod, "WORLD_SIZE"), std::to_string(workers));
    EXPECT_EQ(job_file(name)["spec"]["gang"]["workers"], workers);
    const json j = *job(name);
    EXPECT_EQ(j["status"].value("attempt", -1), attempt);
    EXPECT_EQ(j["status"].value("restarts", -1), 0) << "an edit is not a failure";
    EXPECT_EQ(j["status"].value("observedGeneration", -1), j["metadata"].value("generation", -2));
  }
};

// Scale-up 2 -> 3 and scale-down 3 -> 2 with backoffLimit 0: each is a new attempt with the new shape, the job
// never fails and no GangRestart (a failure) is reported.
TEST_F(SpecEditsE2E, GangShapeEditsAreNewAttemptsInBothDirections) {
  apply("sierra", 2, "    backoffLimit: 0\n");
  ASSERT_TRUE(eventually([] { return gang_running("sierra", 2, 0); })) << phase("sierra");
  wait_phase("sierra", "Running");
  ASSERT_EQ(patch("sierra", {{"spec", {{"gang", {{"workers", 3}}}, {"training", {{"batchSize", 96}}}}}}).code, 0);
  ASSERT_TRUE(eventually([] { return gang_running("sierra", 3, 1); }))
      << phase("sierra") << " " << failed_reason("sierra");
  wait_phase("sierra", "Running");
  expect_shape("sierra", 3, 1);
  EXPECT_TRUE(has_event("sierra", "Normal", "SpecChanged", "spec.gang.workers: 2 -> 3"));

  ASSERT_EQ(patch("sierra", {{"spec", {{"gang", {{"workers", 2}}}}}}).code, 0);
  ASSERT_TRUE(eventually([] { return gang_running("sierra", 2, 2); }))
      << phase("sierra") << " " << failed_reason("sierra");
  wait_phase("sierra", "Running");
  expect_shape("sierra", 2, 2);
  EXPECT_TRUE(has_event("sierra", "Normal", "SpecChanged", "spec.gang.workers: 3 -> 2"));
  for (const auto& e : events_of("sierra")) EXPECT_NE(e.value("reason", ""), "GangRestart") << e.dump();
  ASSERT_EQ(kubectl({"delete", "trainingjob", "sierra", "--wait=false"}).code, 0);
}

// Issue 13's case: suspend, edit epochs 1 -> 3 and workers 2 -> 4, resume: the new attempt mounts the new spec.
TEST_F(SpecEditsE2E, ResumeMountsTheEditsMadeWhileSuspended) {
  apply("tango-2", 2);
  ASSERT_TRUE(eventually([] { return gang_running("tango-2", 2, 0); })) << phase("tango-2");
  ASSERT_EQ(patch("tango-2", {{"spec", {{"runPolicy", {{"suspend", true}}}}}}).code, 0);
  wait_phase("tango-2", "Suspended");
  ASSERT_TRUE(eventually([] { return pods_of("tango-2").empty(); }));
  ASSERT_EQ(patch("tango-2", {{"spec",
                               {{"gang", {{"workers", 4}}},
                                {"training", {{"epochs", 3}, {"batchSize", 128}}},
                                {"runPolicy", {{"suspend", false}}}}}})
                .code,
            0);
  ASSERT_TRUE(eventually([] { return gang_running("tango-2", 4, 1); })) << phase("tango-2");
  wait_phase("tango-2", "Running");
  expect_shape("tango-2", 4, 1);
  EXPECT_EQ(job_file("tango-2")["spec"]["training"]["epochs"], 3);
  ASSERT_EQ(kubectl({"delete", "trainingjob", "tango-2", "--wait=false"}).code, 0);
}

// `9lives` is a DNS-1123 label but no Service name: the CRD refuses it at admission, and `torus validate` agrees.
TEST_F(SpecEditsE2E, ANameThatCannotMakeAServiceIsRefusedAtAdmission) {
  const std::string file = (dir_ / "9lives.yaml").string();
  std::ofstream(file) << job_yaml("9lives", 1);
  const CmdResult applied = kubectl({"apply", "-f", file});
  EXPECT_NE(applied.code, 0) << applied.out;
  EXPECT_NE(applied.out.find("metadata.name"), std::string::npos) << applied.out;
  EXPECT_FALSE(job("9lives"));
  const CmdResult validated = run_command({kBin + "torus", "validate", file});
  EXPECT_EQ(validated.code, 1) << validated.out;
  EXPECT_NE(validated.out.find("metadata.name: must be a DNS-1035 label"), std::string::npos) << validated.out;
}

// A pod template whose sidecar has no image: every pod create is a 422. The job fails with InvalidSpec and a Warning
// event that carries the server's message, instead of retrying in silence.
TEST_F(SpecEditsE2E, AChildRefusedForGoodFailsTheJob) {
  std::string yaml = job_yaml("uniform", 2);
  // A sidecar without an image, beside the worker of the job's template (which mounts the checkpoint volume).
  const std::string worker = "containers: [{name: worker, volumeMounts: [{name: ckpt, mountPath: /ckpt}]}";
  yaml.replace(yaml.find(worker), worker.size(), worker + ", {name: sidecar}");
  const std::string file = (dir_ / "uniform.yaml").string();
  std::ofstream(file) << yaml;
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);
  wait_phase("uniform", "Failed");
  EXPECT_EQ(failed_reason("uniform"), "InvalidSpec");
  EXPECT_TRUE(eventually([] { return has_event("uniform", "Warning", "InvalidSpec", "(422)"); }))
      << kubectl({"get", "events", "--field-selector", "involvedObject.name=uniform"}).out;
  EXPECT_TRUE(has_event("uniform", "Warning", "InvalidSpec", "spec.containers[1].image"));
  EXPECT_TRUE(pods_of("uniform").empty());
  ASSERT_EQ(kubectl({"delete", "trainingjob", "uniform", "--wait=false"}).code, 0);
}

// A refusal that may pass later (403: a quota or RBAC being fixed) is no failure: a FailedCreate Warning event says
// it, and the pass is retried until the pods exist.
TEST_F(SpecEditsE2E, AForbiddenCreateIsAWarningEventAndRetried) {
  control("faults", {{"action", "fail"}, {"verb", "create"}, {"resource", "pods"}, {"count", 3}, {"code", 403}});
  apply("whiskey", 2);
  EXPECT_TRUE(eventually([] { return has_event("whiskey", "Warning", "FailedCreate", "retrying with backoff"); }))
      << kubectl({"get", "events", "--field-selector", "involvedObject.name=whiskey"}).out;
  EXPECT_TRUE(has_event("whiskey", "Warning", "FailedCreate", "creating Pod whiskey-worker-"));
  ASSERT_TRUE(eventually([] { return gang_running("whiskey", 2, 0); }, 60s)) << phase("whiskey");
  EXPECT_EQ(failed_reason("whiskey"), "");
  ASSERT_EQ(kubectl({"delete", "trainingjob", "whiskey", "--wait=false"}).code, 0);
}

}  // namespace
}  // namespace torus::controller

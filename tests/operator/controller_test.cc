// operator/controller/controller.cc in this process, against the in-process stand-in with the TrainingJob CRD and a
// simulated kubelet: a job's children are created and its status reaches Running; a status write refused with 409
// is redone promptly (counted as a conflict, not an error); a child that already exists is no failure; a forbidden
// create is one FailedCreate warning however often it is retried; the default worker image fills an empty
// spec.gang.image; keys the controller does not own cost no request.
#include "operator/controller/controller.h"

#include <gtest/gtest.h>

#include "operator/controller/labels.h"
#include "tests/apiserver/kubelet_sim.h"
#include "tests/apiserver/yaml_json.h"
#include "tests/operator/inprocess_standin.h"

namespace torus::controller {
namespace {

using namespace std::chrono_literals;
using kube::test::eventually;
namespace res = kube::resources;
constexpr const char* kNs = "default";

json training_job(const std::string& name, int workers) {
  return {{"apiVersion", "torus.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"gang",
             {{"workers", workers},
              {"device", "cpu"},
              // Checkpoints on storage that outlives pods (operator/controller/checkpoint_storage.h).
              {"template",
               {{"spec",
                 {{"containers", {{{"name", "worker"}, {"volumeMounts", {{{"name", "ckpt"}, {"mountPath", "/ckpt"}}}}}}},
                  {"volumes", {{{"name", "ckpt"}, {"hostPath", {{"path", "/var/lib/torus/ckpt"}}}}}}}}}}}},
            {"model", {{"arch", "resnet9"}}},
            {"data", {{"dataset", "synthetic"}}},
            {"training",
             {{"epochs", 1},
              {"batchSize", 32 * workers},
              {"lrSchedule", {{"type", "one-cycle"}, {"peak", 0.1}}},
              {"checkpoint", {{"dir", "/ckpt"}}}}},
            {"runPolicy", {{"restartPolicy", "ExitCode"}}}}}};
}

class ControllerTest : public kube::test::InProcessStandin {
 protected:
  void SetUp() override {
    InProcessStandin::SetUp();
    standin::Store& store = server_->store();
    const auto crd_type = store.registry().find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    for (const json& doc : standin::yaml_file_documents(TORUS_SOURCE_DIR "/crds/trainingjobs.torus.dev.yaml")) {
      store.create(*crd_type, "", doc);
    }
    kubelet_ = std::make_unique<standin::KubeletSim>(*server_);
  }
  void TearDown() override {
    controller_.reset();
    kubelet_.reset();
    InProcessStandin::TearDown();
  }
  void start(ControllerOptions options = {}) {
    options.namespaces = {kNs};
    options.workers = 2;
    controller_ = std::make_unique<Controller>(*client_, options, &metrics_);
    ASSERT_TRUE(controller_->start(10s));
    ASSERT_TRUE(controller_->synced());
  }
  std::string phase(const std::string& name) {
    auto job = client_->try_get(res::kTrainingJobs, kNs, name);
    return job ? job->value("status", json::object()).value("phase", "") : "<gone>";
  }
  std::vector<json> pods_of(const std::string& name) {
    return client_->list(res::kPods, kNs, {.label_selector = std::string(kLabelJobName) + "=" + name})["items"];
  }
  std::vector<json> events_with_reason(const std::string& reason) {
    std::vector<json> out;
    const json events = client_->list(res::kEvents, kNs);
    for (const json& e : events["items"]) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  // The informers open their watches after their lists filled the caches, and start() waits for the lists only: with
  // no job to reconcile, the controller sends nothing more once every kind it listed is being watched.
  bool every_listed_kind_watched() const {
    const json counters = server_->faults().counters();
    for (const auto& [resource, verbs] : counters["byResource"].items()) {
      if (verbs.contains("list") && verbs.value("watch", int64_t{0}) == 0) return false;
    }
    return true;
  }

  metrics::Registry registry_;
  metrics::OperatorMetrics metrics_{registry_};
  std::unique_ptr<standin::KubeletSim> kubelet_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, AJobGetsItsOwnedChildrenAndRuns) {
  start();
  const json job = client_->create(res::kTrainingJobs, kNs, training_job("alpha", 2));
  const std::string uid = job["metadata"]["uid"];
  ASSERT_TRUE(eventually([&] { return phase("alpha") == "Running"; })) << phase("alpha");
  const auto controlled_by_job = [&](const json& child) {
    for (const json& ref : child["metadata"].value("ownerReferences", json::array())) {
      if (ref.value("uid", "") == uid && ref.value("controller", false)) return true;
    }
    return false;
  };
  const std::vector<json> pods = pods_of("alpha");
  ASSERT_EQ(pods.size(), 2u);
  for (const json& pod : pods) EXPECT_TRUE(controlled_by_job(pod)) << pod["metadata"].dump();
  EXPECT_TRUE(controlled_by_job(client_->get(res::kServices, kNs, service_name("alpha"))));
  EXPECT_TRUE(controlled_by_job(client_->get(res::kConfigMaps, kNs, config_map_name("alpha"))));
  EXPECT_TRUE(controlled_by_job(client_->get(res::kSecrets, kNs, secret_name("alpha"))));
  EXPECT_EQ(server_->faults().count("create", "pods"), 2) << "each child created once";
  EXPECT_EQ(metrics_.reconcile_errors.labels({"api"}).value(), 0);
}

TEST_F(ControllerTest, AStatusWriteRefusedWith409IsRedoneAndCountedAsAConflict) {
  start();
  server_->faults().conflict_next(3, "trainingjobs.torus.dev");
  client_->create(res::kTrainingJobs, kNs, training_job("bravo", 1));
  ASSERT_TRUE(eventually([&] { return phase("bravo") == "Running"; })) << phase("bravo");
  EXPECT_EQ(metrics_.reconcile_errors.labels({"conflict"}).value(), 3);
  EXPECT_EQ(metrics_.reconcile_errors.labels({"api"}).value(), 0) << "a conflict is not an API error";
  EXPECT_GE(server_->faults().count("update", "trainingjobs.torus.dev/status"), 4);
  EXPECT_EQ(server_->faults().count("create", "pods"), 1) << "the redone passes create nothing twice";
}

TEST_F(ControllerTest, AForbiddenCreateIsOneFailedCreateWarningAndIsRetried) {
  start();
  server_->faults().fail_next(3, {"create", "pods"}, 403);
  client_->create(res::kTrainingJobs, kNs, training_job("charlie", 1));
  ASSERT_TRUE(eventually([&] { return phase("charlie") == "Running"; })) << phase("charlie");
  const std::vector<json> warnings = events_with_reason("FailedCreate");
  ASSERT_EQ(warnings.size(), 1u) << "the same refusal three times is one event";
  EXPECT_EQ(warnings[0].value("type", ""), "Warning");
  EXPECT_EQ(warnings[0]["involvedObject"].value("name", ""), "charlie");
  EXPECT_NE(warnings[0].value("message", "").find("403"), std::string::npos) << warnings[0].dump();
  EXPECT_EQ(server_->faults().count("create", "pods"), 4);
}

// The children's names are deterministic, so a child that exists but that the caches do not show yet (made by a
// replica killed before its watch delivered it, or by an earlier pass) answers the create with 409 AlreadyExists:
// that is no failure, the job's other children are made and it runs. Here the Service is made first without the
// operator's labels, so no informer ever shows it and the operator's create always meets it.
TEST_F(ControllerTest, AChildThatAlreadyExistsIsNoFailure) {
  start();
  client_->create(res::kServices, kNs,
                  {{"metadata", {{"name", service_name("echo")}}},
                   {"spec", {{"clusterIP", "None"}, {"selector", {{"app", "echo"}}}}}});
  client_->create(res::kTrainingJobs, kNs, training_job("echo", 2));
  ASSERT_TRUE(eventually([&] { return phase("echo") == "Running"; })) << phase("echo");
  EXPECT_GE(server_->faults().count("create", "services"), 2) << "the operator's create never met the Service";
  EXPECT_EQ(pods_of("echo").size(), 2u);
  EXPECT_EQ(metrics_.reconcile_errors.labels({"api"}).value(), 0) << "409 AlreadyExists is not an API error";
}

TEST_F(ControllerTest, TheDefaultWorkerImageFillsAnEmptyGangImage) {
  start({.default_worker_image = "registry.example/torus-worker:1"});
  client_->create(res::kTrainingJobs, kNs, training_job("delta", 1));
  ASSERT_TRUE(eventually([&] { return pods_of("delta").size() == 1u; }));
  EXPECT_EQ(pods_of("delta")[0]["spec"]["containers"][0].value("image", ""), "registry.example/torus-worker:1");
}

TEST_F(ControllerTest, KeysOutsideTheWatchedNamespacesOrOfNoCachedJobCostNoRequest) {
  start();
  // Else a watch reaching the server after `before` is read counts as a request of the keys.
  ASSERT_TRUE(eventually([&] { return every_listed_kind_watched(); })) << server_->faults().counters().dump();
  const int64_t before = server_->faults().counters().value("total", int64_t{0});
  EXPECT_FALSE(controller_->reconcile("elsewhere/job").has_value());
  EXPECT_FALSE(controller_->reconcile(std::string(kNs) + "/missing").has_value());
  EXPECT_EQ(server_->faults().counters().value("total", int64_t{0}), before);
}

}  // namespace
}  // namespace torus::controller

// The stand-in driven by the real kubectl (the pinned v1.35, TORUS_KUBECTL): what the operator's integration tests and
// the Helm chart test rely on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class KubectlTest : public StandinTest {};

const char* kJob = R"(apiVersion: torus.dev/v1
kind: TrainingJob
metadata:
  name: job-a
  labels: {team: vision}
spec:
  workers: 2
  model: resnet9
)";

TEST_F(KubectlTest, DiscoveryListsBuiltInsAndCrdOnceCreated) {
  std::string before = ok({"api-resources", "-o", "name"});
  EXPECT_THAT(before, HasSubstr("pods\n"));
  EXPECT_THAT(before, HasSubstr("leases.coordination.k8s.io"));
  EXPECT_THAT(before, Not(HasSubstr("trainingjobs")));
  apply_crd();
  std::string after = ok({"api-resources", "--api-group=torus.dev"});
  EXPECT_THAT(after, HasSubstr("trainingjobs"));
  EXPECT_THAT(after, HasSubstr("tj"));
  EXPECT_THAT(after, HasSubstr("TrainingJob"));
  EXPECT_THAT(ok({"get", "crd", "trainingjobs.torus.dev", "-o",
                  "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"}),
              HasSubstr("True"));
}

TEST_F(KubectlTest, AppliesGetsPatchesAndDeletesATrainingJob) {
  apply_crd();
  std::string job = write_file("job.yaml", kJob);
  EXPECT_THAT(ok({"apply", "-f", job}), HasSubstr("trainingjob.torus.dev/job-a created"));
  json created = get_json({"get", "tj", "job-a", "-o", "json"});
  EXPECT_EQ(created["spec"]["batchSize"], 128) << "schema default applied";
  EXPECT_EQ(created["metadata"]["generation"], 1);
  EXPECT_FALSE(created["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(created["metadata"]["creationTimestamp"].get<std::string>().empty());

  // Re-applying a changed manifest: kubectl sends a JSON merge patch for custom resources.
  std::string changed = kJob;
  changed.replace(changed.find("workers: 2"), 10, "workers: 3");
  EXPECT_THAT(ok({"apply", "-f", write_file("job2.yaml", changed)}), HasSubstr("configured"));
  json applied = get_json({"get", "tj", "job-a", "-o", "json"});
  EXPECT_EQ(applied["spec"]["workers"], 3);
  EXPECT_EQ(applied["metadata"]["generation"], 2);
  EXPECT_GT(std::stoll(applied["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll(created["metadata"]["resourceVersion"].get<std::string>()));

  ok({"patch", "tj", "job-a", "--type=json", "-p", R"([{"op":"replace","path":"/spec/workers","value":4}])"});
  EXPECT_EQ(get_json({"get", "tj", "job-a", "-o", "json"})["spec"]["workers"], 4);
  // Labels are metadata: no generation bump.
  ok({"label", "tj", "job-a", "tier=gold"});
  EXPECT_EQ(get_json({"get", "tj", "job-a", "-o", "json"})["metadata"]["generation"], 3);

  std::string table = ok({"get", "trainingjobs"});
  EXPECT_THAT(table, HasSubstr("WORKERS"));
  EXPECT_THAT(table, HasSubstr("PHASE"));
  EXPECT_THAT(ok({"delete", "tj", "job-a"}), HasSubstr("deleted"));
  CommandResult gone = kubectl({"get", "tj", "job-a"});
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_THAT(gone.err, HasSubstr("trainingjobs.torus.dev \"job-a\" not found"));
}

TEST_F(KubectlTest, SchemaViolationsAreRejectedNamingTheField) {
  apply_crd();
  std::string bad = write_file("bad.yaml", R"(apiVersion: torus.dev/v1
kind: TrainingJob
metadata: {name: bad}
spec: {workers: 0, model: vgg}
)");
  CommandResult r = kubectl({"apply", "-f", bad});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("spec.workers"));
  EXPECT_THAT(r.err, HasSubstr("spec.model: Unsupported value: \"vgg\""));

  std::string missing = write_file("missing.yaml",
                                   "apiVersion: torus.dev/v1\nkind: TrainingJob\nmetadata: {name: m}\n"
                                   "spec: {workers: 1}\n");
  r = kubectl({"apply", "-f", missing});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("spec.model: Required value"));

  // kubectl's default --validate=strict sends fieldValidation=Strict: unknown fields are errors...
  std::string unknown = write_file("unknown.yaml",
                                   "apiVersion: torus.dev/v1\nkind: TrainingJob\nmetadata: {name: u}\n"
                                   "spec: {workers: 1, model: resnet9, colour: red}\n");
  r = kubectl({"apply", "-f", unknown});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("unknown field \"spec.colour\""));
  // ... and --validate=false (fieldValidation=Ignore) prunes them, as the apiserver does.
  ok({"apply", "--validate=false", "-f", unknown});
  EXPECT_FALSE(get_json({"get", "tj", "u", "-o", "json"})["spec"].contains("colour"));
}

TEST_F(KubectlTest, StatusSubresourceSeparatesSpecAndStatus) {
  apply_crd();
  ok({"apply", "-f", write_file("job.yaml", kJob)});
  // The main endpoint ignores status changes...
  ok({"patch", "tj", "job-a", "--type=merge", "-p", R"({"status":{"phase":"Hacked"}})"});
  EXPECT_FALSE(get_json({"get", "tj", "job-a", "-o", "json"}).contains("status"));
  // ... the status endpoint changes status only, without a generation bump.
  ok({"patch", "tj", "job-a", "--subresource=status", "--type=merge", "-p",
      R"({"status":{"phase":"Running"},"spec":{"workers":9}})"});
  json job = get_json({"get", "tj", "job-a", "-o", "json"});
  EXPECT_EQ(job["status"]["phase"], "Running");
  EXPECT_EQ(job["spec"]["workers"], 2);
  EXPECT_EQ(job["metadata"]["generation"], 1);
  ok({"wait", "--for=jsonpath={.status.phase}=Running", "tj/job-a", "--timeout=10s"});
}

TEST_F(KubectlTest, StaleUpdateGetsConflictAndExistingNameGetsAlreadyExists) {
  apply_crd();
  ok({"create", "-f", write_file("job.yaml", kJob)});
  std::string stale = ok({"get", "tj", "job-a", "-o", "json"});
  ok({"patch", "tj", "job-a", "--type=merge", "-p", R"({"spec":{"workers":5}})"});
  CommandResult r = kubectl({"replace", "-f", write_file("stale.json", stale)});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Operation cannot be fulfilled on trainingjobs.torus.dev \"job-a\": the object has "
                               "been modified"));
  r = kubectl({"create", "-f", write_file("again.yaml", kJob)});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("AlreadyExists"));
}

TEST_F(KubectlTest, LabelSelectorsFilterLists) {
  std::string manifests;
  for (auto [name, labels] : std::vector<std::pair<std::string, std::string>>{
           {"a", "{app: x, tier: web}"}, {"b", "{app: \"y\", tier: db}"}, {"c", "{app: z}"}}) {
    manifests += "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", labels: " + labels + "}\n---\n";
  }
  ok({"apply", "-f", write_file("cms.yaml", manifests)});
  auto names = [&](const std::string& selector) { return ok({"get", "cm", "-l", selector, "-o", "name"}); };
  EXPECT_EQ(names("app=x"), "configmap/a\n");
  EXPECT_EQ(names("app in (x,y)"), "configmap/a\nconfigmap/b\n");
  // kube-root-ca.crt, which every namespace has (as in a cluster), carries no labels.
  EXPECT_EQ(names("app notin (x,y)"), "configmap/c\nconfigmap/kube-root-ca.crt\n");
  EXPECT_EQ(names("tier"), "configmap/a\nconfigmap/b\n");
  EXPECT_EQ(names("!tier"), "configmap/c\nconfigmap/kube-root-ca.crt\n");
  EXPECT_EQ(names("app!=x,tier"), "configmap/b\n");
  EXPECT_EQ(ok({"get", "cm", "--field-selector", "metadata.name=b", "-o", "name"}), "configmap/b\n");
  CommandResult bad = kubectl({"get", "cm", "-l", "app in x"});
  EXPECT_NE(bad.exit_code, 0);
  // Lists in pages of 2 (kubectl --chunk-size sends limit and continue).
  EXPECT_EQ(ok({"get", "cm", "--chunk-size=2", "-l", "app", "-o", "name"}), "configmap/a\nconfigmap/b\nconfigmap/c\n");
}

TEST_F(KubectlTest, GetWatchReceivesChanges) {
  apply_crd();
  ok({"apply", "-f", write_file("job.yaml", kJob)});
  BackgroundKubectl watch(*kubectl_, {"get", "tj", "-w", "-o", "custom-columns=NAME:.metadata.name,W:.spec.workers"});
  ASSERT_TRUE(watch.wait_for_line("job-a")) << "initial state";
  ok({"patch", "tj", "job-a", "--type=merge", "-p", R"({"spec":{"workers":7}})"});
  EXPECT_TRUE(watch.wait_for_line("7"));
}

TEST_F(KubectlTest, DeletingAnOwnerCollectsItsDependents) {
  apply_crd();
  ok({"apply", "-f", write_file("job.yaml", kJob)});
  std::string uid = ok({"get", "tj", "job-a", "-o", "jsonpath={.metadata.uid}"});
  std::string owner = "ownerReferences: [{apiVersion: torus.dev/v1, kind: TrainingJob, name: job-a, uid: " + uid +
                      ", controller: true, blockOwnerDeletion: true}]";
  ok({"apply", "-f",
      write_file("children.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: job-a-config\n  " + owner +
                                      "\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: "
                                      "job-a-worker-0\n  " +
                                      owner +
                                      "\nspec:\n  restartPolicy: Never\n  containers: [{name: w, image: "
                                      "torus-worker:1}]\n")});
  ok({"wait", "--for=condition=Ready", "pod/job-a-worker-0", "--timeout=10s"});
  ok({"delete", "tj", "job-a"});
  ok({"wait", "--for=delete", "pod/job-a-worker-0", "configmap/job-a-config", "--timeout=10s"});
  EXPECT_EQ(ok({"get", "cm,pods", "-o", "name"}), "configmap/kube-root-ca.crt\n");

  // Orphan: the dependents stay and lose the owner reference.
  ok({"apply", "-f", write_file("job.yaml", kJob)});
  uid = ok({"get", "tj", "job-a", "-o", "jsonpath={.metadata.uid}"});
  ok({"apply", "-f",
      write_file("cm.yaml",
                 "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  "
                 "ownerReferences: [{apiVersion: torus.dev/v1, kind: TrainingJob, name: "
                 "job-a, uid: " +
                     uid + "}]\n")});
  ok({"delete", "tj", "job-a", "--cascade=orphan"});
  json kept = get_json({"get", "cm", "kept", "-o", "json"});
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));
}

TEST_F(KubectlTest, FinalizersKeepTheObjectUntilCleared) {
  apply_crd();
  ok({"apply", "-f", write_file("job.yaml", kJob)});
  ok({"patch", "tj", "job-a", "--type=merge", "-p", R"({"metadata":{"finalizers":["torus.dev/cleanup"]}})"});
  ok({"delete", "tj", "job-a", "--wait=false"});
  json pending = get_json({"get", "tj", "job-a", "-o", "json"});
  EXPECT_TRUE(pending["metadata"].contains("deletionTimestamp"));
  CommandResult r = kubectl({"patch", "tj", "job-a", "--type=merge", "-p",
                             R"({"metadata":{"finalizers":["torus.dev/cleanup","torus.dev/another"]}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("no new finalizers can be added if the object is being deleted"));
  ok({"patch", "tj", "job-a", "--type=json", "-p", R"([{"op":"remove","path":"/metadata/finalizers"}])"});
  EXPECT_NE(kubectl({"get", "tj", "job-a"}).exit_code, 0);
}

TEST_F(KubectlTest, PodsApplyWithStrategicMergePatch) {
  std::string pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  restartPolicy: Never\n  containers:\n"
      "  - {name: a, image: img:1, env: [{name: X, value: '1'}]}\n  - {name: b, image: img:1}\n";
  ok({"apply", "-f", write_file("pod.yaml", pod)});
  std::string changed = pod;
  changed.replace(changed.find("{name: a, image: img:1"), 22, "{name: a, image: img:2");
  ok({"apply", "-f", write_file("pod2.yaml", changed)});
  json p = get_json({"get", "pod", "p", "-o", "json"});
  ASSERT_EQ(p["spec"]["containers"].size(), 2u);
  EXPECT_EQ(p["spec"]["containers"][0]["image"], "img:2");
  EXPECT_EQ(p["spec"]["containers"][1]["image"], "img:1");
  EXPECT_EQ(p["spec"]["containers"][0]["env"][0]["value"], "1");
  // Other pod spec fields are immutable.
  CommandResult r = kubectl({"patch", "pod", "p", "-p", R"({"spec":{"restartPolicy":"Always"}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("pod updates may not change fields"));
}

TEST_F(KubectlTest, NamespacesMustExistAndTakeTheirContentsAlong) {
  std::string cm = write_file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
  CommandResult r = kubectl({"apply", "-f", cm, "-n", "nowhere"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("namespaces \"nowhere\" not found"));
  ok({"apply", "-f", write_file("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n")});
  ok({"apply", "-f", cm, "-n", "team"});
  ok({"delete", "namespace", "team", "--timeout=10s"});
  EXPECT_EQ(ok({"get", "cm", "-A", "--field-selector", "metadata.namespace=team", "-o", "name"}), "");
  EXPECT_EQ(ok({"get", "cm", "-A", "--field-selector", "metadata.name=x", "-o", "name"}), "");
  // kubectl's generators send protobuf: read for namespaces, config maps, secrets and service accounts.
  ok({"create", "namespace", "generated"});
  ok({"create", "configmap", "settings", "-n", "generated", "--from-literal=lr=0.1"});
  ok({"create", "secret", "generic", "token", "-n", "generated", "--from-literal=key=abc"});
  EXPECT_EQ(get_json({"get", "cm", "settings", "-n", "generated", "-o", "json"})["data"]["lr"], "0.1");
  EXPECT_EQ(get_json({"get", "secret", "token", "-n", "generated", "-o", "json"})["data"]["key"], "YWJj");
  // Other kinds in protobuf are refused with 415.
  r = kubectl({"create", "deployment", "d", "--image=x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("protobuf"));
}

TEST_F(KubectlTest, InjectedFaultsReachKubectl) {
  server_->faults().fail_next(1, FaultMatch{"list", "configmaps"}, 500);
  CommandResult r = kubectl({"get", "cm"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("injected fault"));
  // client-go retries 429 after Retry-After: kubectl succeeds, and the counters saw both requests.
  server_->faults().reset_counters();
  server_->faults().fail_next(1, FaultMatch{"list", "configmaps"}, 429, 1);
  ok({"get", "cm"});
  EXPECT_EQ(server_->faults().count("list", "configmaps"), 2);
  // Forced conflicts on writes, armed through the control endpoint as a script would.
  ok({"apply", "-f", write_file("c.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")});
  ok({"create", "--raw", "/_standin/faults", "-f",
      write_file("conflict.json", R"({"action":"conflict","resource":"configmaps","count":1})")});
  r = kubectl({"label", "cm", "c", "x=y"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("the object has been modified"));
  ok({"label", "cm", "c", "x=y"});
  json stats = json::parse(ok({"get", "--raw", "/_standin/stats"}));
  EXPECT_GE(stats["byResource"]["configmaps"]["patch"].get<int>(), 2);
}

}  // namespace
}  // namespace torus::standin::testing

namespace torus::standin::testing {
namespace {

// The project's own CRD (crds/, the API area's) and examples go through the stand-in as through a cluster.
TEST_F(KubectlTest, ProjectCrdAndExamplesApply) {
  std::string crd = std::string(TORUS_SOURCE_DIR) + "/crds/trainingjobs.torus.dev.yaml";
  std::string example = std::string(TORUS_SOURCE_DIR) + "/examples/fashion-mnist.yaml";
  if (!std::filesystem::exists(crd) || !std::filesystem::exists(example)) {
    GTEST_SKIP() << "crds/trainingjobs.torus.dev.yaml or examples/fashion-mnist.yaml not in this tree";
  }
  ok({"apply", "-f", crd});
  EXPECT_THAT(ok({"apply", "-f", example}), HasSubstr("created"));
  EXPECT_THAT(ok({"get", "trainingjobs"}), HasSubstr("PHASE"));
  EXPECT_THAT(ok({"explain", "trainingjobs.spec"}), HasSubstr("FIELDS"));
}

}  // namespace
}  // namespace torus::standin::testing

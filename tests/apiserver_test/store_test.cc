// The store, patches and selectors without HTTP: the semantics the server exposes.
#include "tests/apiserver/store.h"

#include <gtest/gtest.h>

#include <ctime>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/patch.h"
#include "tests/apiserver/selectors.h"
#include "tests/apiserver/yaml_json.h"

namespace torus::standin {
namespace {

json parse(const char* text) { return json::parse(text); }

int code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.code();
  }
  return 0;
}

TEST(LabelSelector, ParsesEveryOperator) {
  json labels = {{"app", "x"}, {"tier", "web"}, {"gen", "3"}};
  EXPECT_TRUE(LabelSelector::parse("app=x").matches(labels));
  EXPECT_TRUE(LabelSelector::parse("app==x,tier").matches(labels));
  EXPECT_FALSE(LabelSelector::parse("app!=x").matches(labels));
  EXPECT_TRUE(LabelSelector::parse("app in (x, y)").matches(labels));
  EXPECT_FALSE(LabelSelector::parse("app notin (x,y)").matches(labels));
  EXPECT_TRUE(LabelSelector::parse("!missing").matches(labels));
  EXPECT_FALSE(LabelSelector::parse("!app").matches(labels));
  EXPECT_TRUE(LabelSelector::parse("gen>2,gen<4").matches(labels));
  EXPECT_TRUE(LabelSelector::parse("").matches(json()));
  EXPECT_TRUE(LabelSelector::parse("missing notin (a)").matches(labels));
  EXPECT_EQ(code_of([] { LabelSelector::parse("app in x"); }), 400);
  EXPECT_EQ(code_of([] { LabelSelector::parse("app=a b"); }), 400);
  EXPECT_EQ(code_of([] { LabelSelector::parse("gen>x"); }), 400);
}

TEST(FieldSelector, RefusesUnsupportedFields) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "d"}}}, {"spec", {{"nodeName", "n1"}}}};
  EXPECT_TRUE(FieldSelector::parse("metadata.name=p,spec.nodeName=n1", supported_fields("pods")).matches(pod));
  EXPECT_FALSE(FieldSelector::parse("spec.nodeName!=n1", supported_fields("pods")).matches(pod));
  EXPECT_EQ(code_of([] { FieldSelector::parse("spec.nodeName=n1", supported_fields("configmaps")); }), 400);
}

TEST(StrategicMergePatch, MergesListsByKeyAndHonoursDirectives) {
  json pod = parse(R"({"metadata":{"finalizers":["a"]},"spec":{"containers":[
      {"name":"a","image":"i:1","env":[{"name":"X","value":"1"}]},{"name":"b","image":"i:1"}],
      "tolerations":[{"key":"t"}]}})");
  json patched = strategic_merge(pod, parse(R"({"metadata":{"finalizers":["b"]},"spec":{
      "$setElementOrder/containers":[{"name":"b"},{"name":"a"}],
      "containers":[{"name":"a","env":[{"name":"Y","value":"2"}]},{"name":"b","$patch":"delete"}],
      "tolerations":[{"key":"u"}]}})"));
  EXPECT_EQ(patched["metadata"]["finalizers"], parse(R"(["a","b"])"));
  ASSERT_EQ(patched["spec"]["containers"].size(), 1u);
  EXPECT_EQ(patched["spec"]["containers"][0]["image"], "i:1");
  EXPECT_EQ(patched["spec"]["containers"][0]["env"].size(), 2u);
  EXPECT_EQ(patched["spec"]["tolerations"], parse(R"([{"key":"u"}])")) << "lists without a merge key replace";
  json removed = strategic_merge(pod, parse(R"({"$deleteFromPrimitiveList/finalizers":["a"],"metadata":{}})"));
  EXPECT_EQ(
      strategic_merge(pod, parse(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}})"))["metadata"].value(
          "finalizers", json::array()),
      json::array());
  json replaced = strategic_merge(pod, parse(R"({"spec":{"$patch":"replace","containers":[]}})"));
  EXPECT_FALSE(replaced["spec"].contains("tolerations"));
  json service = parse(R"({"spec":{"ports":[{"port":80,"name":"http"},{"port":443,"name":"https"}]}})");
  json service2 = strategic_merge(service, parse(R"({"spec":{"ports":[{"port":80,"targetPort":8080}]}})"));
  EXPECT_EQ(service2["spec"]["ports"].size(), 2u);
  EXPECT_EQ(service2["spec"]["ports"][0]["targetPort"], 8080);
}

TEST(JsonPatch, FailingOperationIs422) {
  json object = parse(R"({"a":1})");
  EXPECT_EQ(apply_patch(PatchType::kJsonPatch, object, parse(R"([{"op":"add","path":"/b","value":2}])"))["b"], 2);
  EXPECT_EQ(code_of([&] { apply_patch(PatchType::kJsonPatch, object, parse(R"([{"op":"remove","path":"/zz"}])")); }),
            422);
  EXPECT_EQ(code_of([] { patch_type_from_content_type("text/plain"); }), 415);
}

class StoreTest : public ::testing::Test {
 protected:
  Store store;
  const ResourceType& cms = *store.registry().find("", "v1", "configmaps");
  const ResourceType& pods = *store.registry().find("", "v1", "pods");
  const ResourceType& deployments = *store.registry().find("apps", "v1", "deployments");
};

TEST_F(StoreTest, MetadataAndResourceVersions) {
  ObjectPtr a = store.create(cms, "default", parse(R"({"metadata":{"generateName":"cfg-"}})")).object;
  std::string name = name_of(*a);
  EXPECT_EQ(name.rfind("cfg-", 0), 0u);
  EXPECT_EQ(name.size(), 9u);
  EXPECT_EQ(resource_version_of(*a), store.resource_version());
  EXPECT_EQ((*a)["kind"], "ConfigMap");
  EXPECT_EQ((*a)["apiVersion"], "v1");
  // A no-op update keeps the resourceVersion.
  ObjectPtr same = store.update(cms, "default", name, *a, Subresource::kMain).object;
  EXPECT_EQ(resource_version_of(*same), resource_version_of(*a));
  EXPECT_EQ(code_of([&] { store.create(cms, "default", parse(R"({"metadata":{"name":"Bad_Name"}})")); }), 422);
  EXPECT_EQ(code_of([&] { store.create(cms, "default", parse(R"({"metadata":{}})")); }), 422);
  EXPECT_EQ(code_of([&] { store.create(cms, "default", parse(R"({"kind":"Secret","metadata":{"name":"x"}})")); }), 400);
  EXPECT_EQ(code_of([&] { store.get(cms, "default", "nope"); }), 404);
}

// What kube-controller-manager makes in every namespace, and the ServiceAccount admission plugin on pods.
TEST(StoreServiceAccounts, EveryNamespaceHasTheDefaultAccountAndTheRootCa) {
  Store store(StoreOptions{.root_ca_pem = "-----BEGIN CERTIFICATE-----\n"});
  const Registry& r = store.registry();
  store.create(*r.find("", "v1", "namespaces"), "", parse(R"({"metadata":{"name":"team"}})"));
  for (const char* ns : {"default", "kube-system", "team"}) {
    EXPECT_NO_THROW(store.get(*r.find("", "v1", "serviceaccounts"), ns, "default")) << ns;
    ObjectPtr ca = store.get(*r.find("", "v1", "configmaps"), ns, "kube-root-ca.crt");
    EXPECT_EQ((*ca)["data"]["ca.crt"], "-----BEGIN CERTIFICATE-----\n") << ns;
  }
}

TEST(StoreServiceAccounts, PodsGetTheirAccountsTokenVolumeUnlessAutomountIsOff) {
  Store store;
  const ResourceType& pods = *store.registry().find("", "v1", "pods");
  const ResourceType& accounts = *store.registry().find("", "v1", "serviceaccounts");
  const char* containers = R"("containers":[{"name":"a","image":"i"},{"name":"b","image":"i"}])";
  ObjectPtr pod =
      store
          .create(pods, "default", json::parse(std::string(R"({"metadata":{"name":"p"},"spec":{)") + containers + "}}"))
          .object;
  const json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["serviceAccountName"], "default");
  ASSERT_EQ(spec["volumes"].size(), 1u);
  const json& volume = spec["volumes"][0];
  const std::string name = volume["name"];
  EXPECT_EQ(name.rfind("kube-api-access-", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("kube-api-access-").size() + 5);
  const json& sources = volume["projected"]["sources"];
  ASSERT_EQ(sources.size(), 3u);
  EXPECT_EQ(sources[0]["serviceAccountToken"]["path"], "token");
  EXPECT_EQ(sources[1]["configMap"]["name"], "kube-root-ca.crt");
  EXPECT_EQ(sources[1]["configMap"]["items"][0]["key"], "ca.crt");
  EXPECT_EQ(sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"], "metadata.namespace");
  for (const json& c : spec["containers"]) {
    ASSERT_EQ(c["volumeMounts"].size(), 1u) << c;
    EXPECT_EQ(
        c["volumeMounts"][0],
        json({{"name", name}, {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}, {"readOnly", true}}));
  }

  // Off on the pod, or on the account (the pod's own setting wins).
  store.create(accounts, "default", parse(R"({"metadata":{"name":"quiet"},"automountServiceAccountToken":false})"));
  for (const std::string& extra :
       {std::string(R"("automountServiceAccountToken":false,)"), std::string(R"("serviceAccountName":"quiet",)")}) {
    const std::string body = R"({"metadata":{"generateName":"off-"},"spec":{)" + extra + containers + "}}";
    EXPECT_FALSE((*store.create(pods, "default", json::parse(body)).object)["spec"].contains("volumes")) << body;
  }
  const std::string on = std::string(R"({"metadata":{"name":"on"},"spec":{"serviceAccountName":"quiet",)") +
                         R"("automountServiceAccountToken":true,)" + containers + "}}";
  EXPECT_EQ((*store.create(pods, "default", json::parse(on)).object)["spec"]["volumes"].size(), 1u);

  // An account that does not exist: refused as the admission plugin refuses it.
  try {
    store.create(pods, "default",
                 json::parse(std::string(R"({"metadata":{"name":"x"},"spec":{"serviceAccountName":"ghost",)") +
                             containers + "}}"));
    ADD_FAILURE() << "a pod of a missing service account was created";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code(), 403);
    EXPECT_STREQ(e.what(),
                 "pods \"x\" is forbidden: error looking up service account default/ghost: serviceaccount "
                 "\"ghost\" not found");
  }
}

TEST_F(StoreTest, GenerationCountsSpecChangesOnly) {
  ObjectPtr d =
      store.create(deployments, "default", parse(R"({"metadata":{"name":"d"},"spec":{"replicas":1}})")).object;
  EXPECT_EQ((*d)["metadata"]["generation"], 1);
  d = store
          .patch(deployments, "default", "d", PatchType::kMerge, parse(R"({"metadata":{"labels":{"a":"b"}}})"),
                 Subresource::kMain)
          .object;
  EXPECT_EQ((*d)["metadata"]["generation"], 1);
  d = store
          .patch(deployments, "default", "d", PatchType::kMerge, parse(R"({"status":{"replicas":1}})"),
                 Subresource::kStatus)
          .object;
  EXPECT_EQ((*d)["metadata"]["generation"], 1);
  EXPECT_EQ((*d)["status"]["replicas"], 1);
  d = store
          .patch(deployments, "default", "d", PatchType::kMerge, parse(R"({"spec":{"replicas":2}})"),
                 Subresource::kMain)
          .object;
  EXPECT_EQ((*d)["metadata"]["generation"], 2);
  EXPECT_EQ((*d)["status"]["replicas"], 1) << "the main endpoint keeps status";
}

TEST_F(StoreTest, ForegroundDeletionWaitsForDependents) {
  ObjectPtr owner = store.create(cms, "default", parse(R"({"metadata":{"name":"owner"}})")).object;
  json ref = {{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"name", "owner"},
              {"uid", (*owner)["metadata"]["uid"]},
              {"blockOwnerDeletion", true}};
  store.create(cms, "default",
               json{{"metadata", {{"name", "dep"}, {"ownerReferences", {ref}}, {"finalizers", {"test/hold"}}}}});
  DeleteOptions foreground;
  foreground.propagation = Propagation::kForeground;
  DeleteResult r = store.remove(cms, "default", "owner", foreground);
  EXPECT_EQ(r.state, DeleteResult::State::kPending);
  ObjectPtr dep = store.get(cms, "default", "dep");
  EXPECT_TRUE((*dep)["metadata"].contains("deletionTimestamp")) << "dependent deleted first";
  EXPECT_NO_THROW(store.get(cms, "default", "owner")) << "owner waits for the dependent's finalizer";
  store.patch(cms, "default", "dep", PatchType::kMerge, parse(R"({"metadata":{"finalizers":null}})"),
              Subresource::kMain);
  EXPECT_EQ(code_of([&] { store.get(cms, "default", "dep"); }), 404);
  EXPECT_EQ(code_of([&] { store.get(cms, "default", "owner"); }), 404);
}

// Graceful pod deletion as rest.BeforeDelete does it: the first delete marks the pod (deletionTimestamp = now +
// grace); a repeated delete answers the pod as it is, with the deletion timestamp it has, unless it asks for a
// shorter grace, which moves the timestamp by the difference; grace 0 (the kubelet's final delete, or --force)
// removes it at once, unless a finalizer holds it.
class PodDeletionTest : public StoreTest {
 protected:
  void SetUp() override { store.set_pod_deletion(PodDeletion::kGraceful); }

  ObjectPtr running_pod(const std::string& name, const std::string& extra_meta = "") {
    return store
        .create(pods, "default",
                json::parse(R"({"metadata":{"name":")" + name + "\"" + extra_meta +
                            R"(},"spec":{"nodeName":"node-0","terminationGracePeriodSeconds":30,)"
                            R"("containers":[{"name":"a","image":"i"}]},"status":{"phase":"Running"}})"))
        .object;
  }
  static DeleteOptions grace(int64_t seconds) {
    DeleteOptions options;
    options.grace_period_seconds = seconds;
    return options;
  }
  // Seconds from a to b, both RFC 3339 timestamps.
  static int64_t seconds_between(const std::string& a, const std::string& b) {
    auto at = [](const std::string& text) {
      std::tm tm{};
      strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
      return static_cast<int64_t>(timegm(&tm));
    };
    return at(b) - at(a);
  }
};

TEST_F(PodDeletionTest, ARepeatedDeleteKeepsThePodAndItsDeletionTimestamp) {
  running_pod("p");
  const std::string before = now_rfc3339();
  DeleteResult first = store.remove(pods, "default", "p", DeleteOptions{});
  ASSERT_EQ(first.state, DeleteResult::State::kPending);
  const json marked = store.get(pods, "default", "p")->at("metadata");
  EXPECT_EQ(marked["deletionGracePeriodSeconds"], 30);
  const int64_t ahead = seconds_between(before, marked["deletionTimestamp"]);
  EXPECT_GE(ahead, 30) << "the deletion timestamp is when the grace ends";
  EXPECT_LE(ahead, 31);
  for (const DeleteOptions& again : {DeleteOptions{}, grace(30), grace(45)}) {
    DeleteResult r = store.remove(pods, "default", "p", again);
    EXPECT_EQ(r.state, DeleteResult::State::kPending);
    EXPECT_EQ((*r.object)["metadata"]["deletionTimestamp"], marked["deletionTimestamp"]);
    const json now = store.get(pods, "default", "p")->at("metadata");
    EXPECT_EQ(now["deletionTimestamp"], marked["deletionTimestamp"]);
    EXPECT_EQ(now["deletionGracePeriodSeconds"], 30);
    EXPECT_EQ(now["resourceVersion"], marked["resourceVersion"]) << "a pending delete writes nothing";
  }
  DeleteOptions foreground;
  foreground.propagation = Propagation::kForeground;
  store.remove(pods, "default", "p", foreground);
  EXPECT_FALSE(store.get(pods, "default", "p")->at("metadata").contains("finalizers"))
      << "finalizers cannot be changed through a pending deletion";
}

TEST_F(PodDeletionTest, AShorterGraceShortensItAndGraceZeroRemovesThePod) {
  running_pod("p");
  store.remove(pods, "default", "p", DeleteOptions{});
  const json marked = store.get(pods, "default", "p")->at("metadata");
  DeleteResult shorter = store.remove(pods, "default", "p", grace(5));
  EXPECT_EQ(shorter.state, DeleteResult::State::kPending);
  const json now = store.get(pods, "default", "p")->at("metadata");
  EXPECT_EQ(now["deletionGracePeriodSeconds"], 5);
  EXPECT_EQ(seconds_between(now["deletionTimestamp"], marked["deletionTimestamp"]), 25);
  DeleteResult gone = store.remove(pods, "default", "p", grace(0));
  EXPECT_EQ(gone.state, DeleteResult::State::kGone);
  EXPECT_EQ((*gone.object)["metadata"]["deletionGracePeriodSeconds"], 0);
  EXPECT_EQ(code_of([&] { store.get(pods, "default", "p"); }), 404);
}

TEST_F(PodDeletionTest, FinalizersHoldAPodPastItsGrace) {
  running_pod("p", R"(,"finalizers":["test/hold"])");
  store.remove(pods, "default", "p", DeleteOptions{});
  EXPECT_EQ(store.remove(pods, "default", "p", grace(0)).state, DeleteResult::State::kPending);
  EXPECT_EQ(store.get(pods, "default", "p")->at("metadata")["deletionGracePeriodSeconds"], 0);
  EXPECT_EQ(store.remove(pods, "default", "p", grace(0)).state, DeleteResult::State::kPending);
  store.patch(pods, "default", "p", PatchType::kMerge, parse(R"({"metadata":{"finalizers":null}})"),
              Subresource::kMain);
  EXPECT_EQ(code_of([&] { store.get(pods, "default", "p"); }), 404);
}

TEST_F(PodDeletionTest, APodNotRunningOnANodeGoesAtOnce) {
  store.create(pods, "default",
               parse(R"({"metadata":{"name":"unbound"},"spec":{"containers":[{"name":"a","image":"i"}]}})"));
  DeleteResult r = store.remove(pods, "default", "unbound", DeleteOptions{});
  EXPECT_EQ(r.state, DeleteResult::State::kGone);
  EXPECT_EQ(code_of([&] { store.get(pods, "default", "unbound"); }), 404);
  // A kind without graceful deletion is unchanged: a repeated delete of one its finalizer holds stays pending.
  store.create(cms, "default", parse(R"({"metadata":{"name":"c","finalizers":["test/hold"]}})"));
  EXPECT_EQ(store.remove(cms, "default", "c", DeleteOptions{}).state, DeleteResult::State::kPending);
  EXPECT_EQ(store.remove(cms, "default", "c", grace(0)).state, DeleteResult::State::kPending);
}

TEST_F(StoreTest, DeletePreconditionsAndSecretsStringData) {
  store.create(cms, "default", parse(R"({"metadata":{"name":"c"}})"));
  DeleteOptions wrong;
  wrong.precondition_uid = "not-the-uid";
  EXPECT_EQ(code_of([&] { store.remove(cms, "default", "c", wrong); }), 409);
  const ResourceType& secrets = *store.registry().find("", "v1", "secrets");
  ObjectPtr s = store.create(secrets, "default", parse(R"({"metadata":{"name":"s"},"stringData":{"k":"hi"}})")).object;
  EXPECT_EQ((*s)["data"]["k"], "aGk=");
  EXPECT_FALSE(s->contains("stringData"));
  EXPECT_EQ(code_of([&] { store.create(secrets, "default", parse(R"({"metadata":{"name":"t"},"data":{"k":"!!"}})")); }),
            422);
}

TEST(YamlJson, ResolvesPlainScalarsOnly) {
  auto docs = yaml_documents("a: 1\nb: '1'\nc: true\nd: ~\ne: 1.5\nf: x\n---\n---\ng: [1, two]\n", "test.yaml");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0], parse(R"({"a":1,"b":"1","c":true,"d":null,"e":1.5,"f":"x"})"));
  EXPECT_EQ(docs[1], parse(R"({"g":[1,"two"]})"));
  try {
    yaml_documents("a: [1,\n", "broken.yaml");
    FAIL() << "expected a parse error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("broken.yaml:"), std::string::npos);
  }
}

}  // namespace
}  // namespace torus::standin

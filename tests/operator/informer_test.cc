// operator/kube/informer.cc: the Store's indexes, and the Informer against the in-process stand-in: list then watch
// fill the cache, a dropped watch resumes from the last resourceVersion without a relist, a compacted history (410)
// relists and replays what changed meanwhile as events, a failing list is retried, selectors and transforms apply.
#include "operator/kube/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/operator/inprocess_standin.h"

namespace torus::kube {
namespace {

using namespace std::chrono_literals;
using test::eventually;
namespace res = resources;

json config_map(const std::string& name, const std::string& app = "mine", const std::string& value = "1") {
  return {{"metadata", {{"name", name}, {"labels", {{"app", app}}}}}, {"data", {{"k", value}}}};
}

std::vector<std::string> by_app(const json& object) { return {object["metadata"]["labels"].value("app", "")}; }

TEST(InformerStore, UpsertEraseAndReplaceKeepTheIndexesInStep) {
  Store store;
  store.add_index("app", by_app);
  json a = config_map("a", "x");
  a["metadata"]["namespace"] = "ns";
  auto [cached, old] = store.upsert(a);
  EXPECT_EQ(old, nullptr);
  EXPECT_EQ((*cached)["metadata"]["name"], "a");
  ASSERT_EQ(store.by_index("app", "x").size(), 1u);

  a["metadata"]["labels"]["app"] = "y";  // relabelled: leaves index value x for y
  auto [again, previous] = store.upsert(a);
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(previous, cached) << "the replaced object is handed back, unchanged, to readers still holding it";
  EXPECT_EQ((*previous)["metadata"]["labels"]["app"], "x");
  EXPECT_TRUE(store.by_index("app", "x").empty());
  EXPECT_EQ(store.by_index("app", "y").size(), 1u);
  EXPECT_EQ(store.get("ns/a"), again);

  json b = config_map("b", "y");  // cluster-scoped key: no namespace
  store.upsert(b);
  EXPECT_EQ(store.keys(), (std::vector<std::string>{"b", "ns/a"}));
  EXPECT_EQ(store.erase("ns/a"), again);
  EXPECT_EQ(store.erase("ns/a"), nullptr);
  EXPECT_EQ(store.by_index("app", "y").size(), 1u);

  const auto gone = store.replace({std::make_shared<const json>(config_map("c", "z"))});
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ((*gone[0])["metadata"]["name"], "b");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.by_index("app", "y").empty());
  EXPECT_EQ(store.by_index("app", "z").size(), 1u);
  EXPECT_TRUE(store.by_index("no-such-index", "z").empty());
}

// What the handlers saw, in order, as "add a", "update a", "delete a".
class Recorder {
 public:
  InformerHandlers handlers() {
    return {[this](const json& o) { record("add", o); }, [this](const json&, const json& o) { record("update", o); },
            [this](const json& o) { record("delete", o); }};
  }
  std::vector<std::string> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  bool saw(const std::string& event) const {
    auto e = events();
    return std::find(e.begin(), e.end(), event) != e.end();
  }

 private:
  void record(const std::string& what, const json& o) {
    std::lock_guard lock(mu_);
    events_.push_back(what + " " + o["metadata"].value("name", ""));
  }
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

class InformerTest : public test::InProcessStandin {
 protected:
  // By default the test's own ConfigMaps (config_map labels them `app`): every namespace also has kube-root-ca.crt,
  // as in a cluster.
  InformerOptions options(const std::string& selector = "app") const {
    InformerOptions o;
    o.namespace_ = "default";
    o.label_selector = selector;
    o.retry_base = 1ms;
    o.retry_cap = 20ms;
    return o;
  }
  void create(const json& object) { client_->create(res::kConfigMaps, "default", object); }
  json get(const std::string& name) { return client_->get(res::kConfigMaps, "default", name); }
  // Starts `informer` and returns once it has listed and its watch is open.
  void start_watching(Informer& informer) {
    informer.start();
    ASSERT_TRUE(informer.wait_synced(10s));
    ASSERT_TRUE(eventually([&] { return server_->open_watches() == 1; }));
  }
  // Ends the open watch and fails every new one (500) until faults().clear(): what changes meanwhile happens while
  // the informer is not watching.
  void cut_watches() {
    server_->faults().fail_next(1000, {"watch", "configmaps"}, 500);
    server_->store().drop_watches();
  }
  int64_t lists() const { return server_->faults().count("list", "configmaps"); }
  bool cached_value(Informer& informer, const std::string& name, const std::string& value) {
    auto o = informer.store().get("default/" + name);
    return o && (*o)["data"].value("k", "") == value;
  }
  Recorder recorder_;
};

TEST_F(InformerTest, ListThenWatchFillTheCacheAndCallTheHandlers) {
  create(config_map("listed"));
  Informer informer(*client_, res::kConfigMaps, options(), recorder_.handlers());
  informer.start();
  ASSERT_TRUE(informer.wait_synced(10s));
  auto listed = informer.store().get("default/listed");
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ((*listed)["kind"], "ConfigMap") << "list items get the kind a watch event's object carries";
  EXPECT_EQ((*listed)["apiVersion"], "v1");

  create(config_map("watched"));
  ASSERT_TRUE(eventually([&] { return informer.store().get("default/watched") != nullptr; }));
  json changed = get("listed");
  changed["data"]["k"] = "2";
  client_->update(res::kConfigMaps, "default", changed);
  ASSERT_TRUE(eventually([&] { return cached_value(informer, "listed", "2"); }));
  client_->remove(res::kConfigMaps, "default", "watched");
  ASSERT_TRUE(eventually([&] { return informer.store().get("default/watched") == nullptr; }));
  EXPECT_TRUE(eventually([&] { return recorder_.events().size() == 4u; }));
  EXPECT_EQ(recorder_.events(),
            (std::vector<std::string>{"add listed", "add watched", "update listed", "delete watched"}));
  EXPECT_EQ(informer.relists(), 0);
  EXPECT_EQ(lists(), 1);
}

TEST_F(InformerTest, ADroppedWatchResumesFromTheLastResourceVersionWithoutARelist) {
  Informer informer(*client_, res::kConfigMaps, options(), recorder_.handlers());
  ASSERT_NO_FATAL_FAILURE(start_watching(informer));
  cut_watches();
  create(config_map("while-away"));
  ASSERT_TRUE(eventually([&] { return server_->faults().count("watch", "configmaps") >= 3; }))
      << "a failed watch is retried with backoff";
  EXPECT_EQ(informer.store().get("default/while-away"), nullptr);
  server_->faults().clear();
  // Resumed from the resourceVersion before the create: the history still has it, so the watch replays it.
  ASSERT_TRUE(eventually([&] { return informer.store().get("default/while-away") != nullptr; }));
  EXPECT_EQ(informer.relists(), 0);
  EXPECT_EQ(lists(), 1);
  EXPECT_GE(informer.rewatches(), 2);
  EXPECT_TRUE(eventually([&] { return !recorder_.events().empty(); }));
  EXPECT_EQ(recorder_.events(), (std::vector<std::string>{"add while-away"}));
}

TEST_F(InformerTest, ACompactedHistoryRelistsAndReplaysWhatChangedAsEvents) {
  create(config_map("kept"));
  create(config_map("deleted-meanwhile"));
  Informer informer(*client_, res::kConfigMaps, options(), recorder_.handlers());
  ASSERT_NO_FATAL_FAILURE(start_watching(informer));
  cut_watches();
  client_->remove(res::kConfigMaps, "default", "deleted-meanwhile");
  create(config_map("created-meanwhile"));
  json kept = get("kept");
  kept["data"]["k"] = "changed";
  client_->update(res::kConfigMaps, "default", kept);
  server_->store().compact();  // the informer's resourceVersion is now too old: 410 Expired
  server_->faults().clear();
  ASSERT_TRUE(eventually([&] { return informer.relists() == 1; }));
  EXPECT_TRUE(eventually([&] { return recorder_.events().size() == 5u; }));
  const std::vector<std::string> events = recorder_.events();
  const std::set<std::string> replayed(events.begin() + 2, events.end());
  EXPECT_EQ(replayed, (std::set<std::string>{"add created-meanwhile", "update kept", "delete deleted-meanwhile"}));
  EXPECT_EQ(informer.store().keys(), (std::vector<std::string>{"default/created-meanwhile", "default/kept"}));
  EXPECT_TRUE(cached_value(informer, "kept", "changed"));
  EXPECT_EQ(lists(), 2);
  // Watching again from the relist's resourceVersion.
  create(config_map("after"));
  EXPECT_TRUE(eventually([&] { return informer.store().get("default/after") != nullptr; }));
}

TEST_F(InformerTest, AFailingFirstListIsRetriedUntilItSyncs) {
  auto client = make_client([] {
    ClientOptions o = test::fast_client_options();
    o.max_retries = 0;  // the informer's own backoff retries
    return o;
  }());
  server_->faults().fail_next(3, {"list", "configmaps"}, 500);
  create(config_map("there"));
  Informer informer(*client, res::kConfigMaps, options(), recorder_.handlers());
  informer.start();
  ASSERT_TRUE(informer.wait_synced(10s));
  EXPECT_EQ(lists(), 4);
  EXPECT_EQ(informer.relists(), 0) << "the first successful list is the sync, not a relist";
  EXPECT_NE(informer.store().get("default/there"), nullptr);
}

TEST_F(InformerTest, TheNamespaceAndLabelSelectorScopeTheCacheAndAnObjectLeavingItIsDeleted) {
  create(config_map("ours"));
  create(config_map("theirs", "other"));
  client_->create(Resource{"", "v1", "namespaces", "Namespace", Scope::kCluster}, "",
                  {{"metadata", {{"name", "elsewhere"}}}});
  client_->create(res::kConfigMaps, "elsewhere",
                  {{"metadata", {{"name", "ours-elsewhere"}, {"labels", {{"app", "mine"}}}}}});
  Informer informer(*client_, res::kConfigMaps, options("app=mine"), recorder_.handlers());
  informer.start();
  ASSERT_TRUE(informer.wait_synced(10s));
  EXPECT_EQ(informer.store().keys(), (std::vector<std::string>{"default/ours"}));
  json relabelled = get("ours");
  relabelled["metadata"]["labels"]["app"] = "other";
  client_->update(res::kConfigMaps, "default", relabelled);
  ASSERT_TRUE(eventually([&] { return informer.store().size() == 0; }));
  // The handler runs after the cache changed: wait for it too.
  EXPECT_TRUE(eventually([&] { return recorder_.events().size() == 2u; }));
  EXPECT_EQ(recorder_.events(), (std::vector<std::string>{"add ours", "delete ours"}));
}

TEST_F(InformerTest, TheTransformAndFieldFilterApplyToListedAndWatchedObjects) {
  create(config_map("listed"));
  InformerOptions o = options();
  o.fields.drop("data");
  o.transform = [](json object) {
    object["metadata"]["annotations"]["seen"] = "yes";
    return object;
  };
  Informer informer(*client_, res::kConfigMaps, std::move(o), recorder_.handlers());
  informer.start();
  ASSERT_TRUE(informer.wait_synced(10s));
  create(config_map("watched"));
  ASSERT_TRUE(eventually([&] { return informer.store().size() == 2; }));
  for (const auto& object : informer.store().list()) {
    EXPECT_FALSE(object->contains("data")) << object->dump();
    EXPECT_EQ((*object)["metadata"]["annotations"].value("seen", ""), "yes") << object->dump();
  }
}

TEST_F(InformerTest, StopEndsAnOpenWatchAndWaitSyncedThenSaysNo) {
  server_->faults().fail_next(1000, {"list", "configmaps"}, 500);
  Informer informer(*client_, res::kConfigMaps, options(), recorder_.handlers());
  informer.start();
  ASSERT_TRUE(eventually([&] { return lists() >= 1; }));
  informer.stop();  // returns once the informer's thread, backing off, has ended
  EXPECT_FALSE(informer.wait_synced(10s)) << "a stopped informer answers at once, not at the timeout";
  EXPECT_FALSE(informer.synced());

  server_->faults().clear();
  Informer watching(*client_, res::kConfigMaps, options(), recorder_.handlers());
  ASSERT_NO_FATAL_FAILURE(start_watching(watching));
  watching.stop();  // cancels the blocked watch instead of waiting out its 300 s timeout
  EXPECT_TRUE(eventually([&] { return server_->open_watches() == 0; }));
}

}  // namespace
}  // namespace torus::kube

// The watch protocol over raw HTTP: what informers depend on (resume from a resourceVersion, bookmarks, 410
// Expired after compaction, selectors, timeouts, dropped connections).
#include <gtest/gtest.h>

#include "tests/apiserver_test/standin_fixture.h"

namespace torus::standin::testing {
namespace {

namespace http = boost::beast::http;

class WatchProtocolTest : public StandinTest {
 protected:
  ServerOptions server_options() const override {
    ServerOptions options;
    options.store.bookmark_interval = std::chrono::milliseconds(200);
    return options;
  }
  HttpReply create_configmap(const std::string& name, const std::string& labels = "{}") {
    return http_request(server_->port(), http::verb::post, "/api/v1/namespaces/default/configmaps",
                        R"({"metadata":{"name":")" + name + R"(","labels":)" + labels + R"(},"data":{"k":"v"}})");
  }
  HttpReply patch_configmap(const std::string& name, const std::string& patch) {
    return http_request(server_->port(), http::verb::patch, "/api/v1/namespaces/default/configmaps/" + name, patch,
                        "application/merge-patch+json");
  }
  std::string list_rv() {
    return http_request(server_->port(), http::verb::get, "/api/v1/namespaces/default/configmaps")
        .body_json()["metadata"]["resourceVersion"];
  }
};

TEST_F(WatchProtocolTest, ResumesFromAListResourceVersion) {
  ASSERT_EQ(create_configmap("a").status, 201);
  std::string rv = list_rv();
  ASSERT_EQ(create_configmap("b").status, 201);
  ASSERT_EQ(patch_configmap("a", R"({"data":{"k":"w"}})").status, 200);
  WatchClient watch(server_->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv);
  ASSERT_EQ(watch.status(), 200);
  auto first = watch.next();
  auto second = watch.next();
  ASSERT_TRUE(first && second);
  EXPECT_EQ((*first)["type"], "ADDED");
  EXPECT_EQ((*first)["object"]["metadata"]["name"], "b");
  EXPECT_EQ((*second)["type"], "MODIFIED");
  EXPECT_EQ((*second)["object"]["data"]["k"], "w");
  ASSERT_EQ(http_request(server_->port(), http::verb::delete_, "/api/v1/namespaces/default/configmaps/b").status, 200);
  auto deleted = watch.next();
  ASSERT_TRUE(deleted);
  EXPECT_EQ((*deleted)["type"], "DELETED");
  EXPECT_GT(std::stoll((*deleted)["object"]["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll((*second)["object"]["metadata"]["resourceVersion"].get<std::string>()));
}

TEST_F(WatchProtocolTest, WithoutResourceVersionStartsWithSyntheticAdds) {
  ASSERT_EQ(create_configmap("a").status, 201);
  WatchClient watch(server_->port(), "/api/v1/namespaces/default/configmaps?watch=true");
  auto event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "ADDED");
  EXPECT_EQ((*event)["object"]["metadata"]["name"], "a");
}

TEST_F(WatchProtocolTest, SendsBookmarksWhenAllowed) {
  std::string rv = list_rv();
  WatchClient watch(server_->port(),
                    "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv);
  auto events = watch.until("BOOKMARK", std::chrono::seconds(5));
  ASSERT_FALSE(events.empty());
  const json& bookmark = events.back();
  EXPECT_EQ(bookmark["type"], "BOOKMARK");
  EXPECT_EQ(bookmark["object"]["kind"], "ConfigMap");
  EXPECT_GE(std::stoll(bookmark["object"]["metadata"]["resourceVersion"].get<std::string>()), std::stoll(rv));
}

// Streaming lists (what client-go reflectors use from v1.35 on, kubectl wait among them): the current state as ADDED
// events, a BOOKMARK annotated k8s.io/initial-events-end at its resourceVersion, then changes.
TEST_F(WatchProtocolTest, SendInitialEventsEndsTheStateWithAnAnnotatedBookmark) {
  ASSERT_EQ(create_configmap("a").status, 201);
  ASSERT_EQ(create_configmap("b").status, 201);
  const std::string rv = list_rv();
  WatchClient watch(server_->port(),
                    "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                    "&resourceVersionMatch=NotOlderThan&resourceVersion=");
  ASSERT_EQ(watch.status(), 200);
  std::vector<std::string> added;
  std::optional<json> event;
  while ((event = watch.next()) && (*event)["type"] == "ADDED") added.push_back((*event)["object"]["metadata"]["name"]);
  EXPECT_EQ(added, (std::vector<std::string>{"a", "b", "kube-root-ca.crt"}));  // the last: every namespace has it
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "BOOKMARK");
  EXPECT_EQ((*event)["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  EXPECT_EQ((*event)["object"]["metadata"]["resourceVersion"], rv);
  ASSERT_EQ(create_configmap("c").status, 201);
  event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "ADDED");
  EXPECT_EQ((*event)["object"]["metadata"]["name"], "c");
}

// Changes after the resourceVersion only (a resourceVersion, not "now": the watch's registration races the create).
TEST_F(WatchProtocolTest, SendInitialEventsFalseSkipsTheState) {
  ASSERT_EQ(create_configmap("a").status, 201);
  const std::string rv = list_rv();
  WatchClient watch(server_->port(),
                    "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=false"
                    "&resourceVersionMatch=NotOlderThan&resourceVersion=" + rv);
  ASSERT_EQ(create_configmap("b").status, 201);
  auto event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "ADDED");
  EXPECT_EQ((*event)["object"]["metadata"]["name"], "b");
}

// The apiserver's ValidateListOptions: 422 Invalid ListOptions naming the parameter.
TEST_F(WatchProtocolTest, ListOptionsTheApiserverRefusesAre422) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"?sendInitialEvents=true", "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"},
      {"?resourceVersionMatch=NotOlderThan",
       "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"},
      {"?resourceVersion=0&resourceVersionMatch=Exact",
       "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""},
      {"?resourceVersion=1&resourceVersionMatch=Newest", "resourceVersionMatch: Unsupported value: \"Newest\""},
      {"?watch=1&sendInitialEvents=true",
       "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
      {"?watch=1&resourceVersionMatch=NotOlderThan",
       "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
       "provided"},
  };
  for (const auto& [query, message] : refused) {
    const HttpReply reply =
        http_request(server_->port(), http::verb::get, "/api/v1/namespaces/default/configmaps" + query);
    EXPECT_EQ(reply.status, 422) << query << ": " << reply.body;
    const json status = reply.body_json();
    EXPECT_EQ(status.value("reason", ""), "Invalid") << query;
    EXPECT_NE(status.value("message", "").find(message), std::string::npos) << query << ": " << reply.body;
  }
  EXPECT_EQ(http_request(server_->port(), http::verb::get,
                         "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=NotOlderThan")
                .status,
            200);
}

TEST_F(WatchProtocolTest, CompactedResourceVersionGets410Expired) {
  std::string old_rv = list_rv();
  ASSERT_EQ(create_configmap("a").status, 201);
  ASSERT_EQ(http_request(server_->port(), http::verb::post, "/_standin/faults", R"({"action":"compact"})").status, 200);
  WatchClient watch(server_->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + old_rv);
  EXPECT_EQ(watch.status(), 200);
  auto event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "ERROR");
  EXPECT_EQ((*event)["object"]["kind"], "Status");
  EXPECT_EQ((*event)["object"]["code"], 410);
  EXPECT_EQ((*event)["object"]["reason"], "Expired");
  EXPECT_FALSE(watch.next(std::chrono::seconds(2)));
  EXPECT_EQ(watch.ended(), WatchClient::End::kFinished);
  // A watch from the current resourceVersion is fine after compaction.
  WatchClient fresh(server_->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + list_rv());
  ASSERT_EQ(create_configmap("b").status, 201);
  auto added = fresh.next();
  ASSERT_TRUE(added);
  EXPECT_EQ((*added)["type"], "ADDED");
}

TEST_F(WatchProtocolTest, SmallHistoryExpiresAWatchThatFellBehind) {
  // A history of 50 events: a resume point 100 writes old is gone.
  ServerOptions options;
  options.store.history_limit = 50;
  ApiServer small(options);
  small.start();
  const ResourceType& cms = *small.store().registry().find("", "v1", "configmaps");
  int64_t start = small.store().resource_version();
  for (int i = 0; i < 100; ++i)
    small.store().create(cms, "default", json{{"metadata", {{"name", "x" + std::to_string(i)}}}});
  WatchClient watch(small.port(), "/api/v1/configmaps?watch=1&resourceVersion=" + std::to_string(start));
  auto event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["object"]["code"], 410);
}

TEST_F(WatchProtocolTest, LabelSelectorWatchSeesObjectsEnterAndLeave) {
  std::string rv = list_rv();
  WatchClient watch(server_->port(),
                    "/api/v1/namespaces/default/configmaps?watch=1&labelSelector=role%3Dworker&resourceVersion=" + rv);
  ASSERT_EQ(create_configmap("other", R"({"role":"driver"})").status, 201);
  ASSERT_EQ(create_configmap("w", R"({"role":"worker"})").status, 201);
  auto added = watch.next();
  ASSERT_TRUE(added);
  EXPECT_EQ((*added)["type"], "ADDED");
  EXPECT_EQ((*added)["object"]["metadata"]["name"], "w");
  ASSERT_EQ(patch_configmap("w", R"({"metadata":{"labels":{"role":"retired"}}})").status, 200);
  auto left = watch.next();
  ASSERT_TRUE(left);
  EXPECT_EQ((*left)["type"], "DELETED") << "an object leaving the selector is a DELETED event for this watch";
  ASSERT_EQ(patch_configmap("other", R"({"metadata":{"labels":{"role":"worker"}}})").status, 200);
  auto entered = watch.next();
  ASSERT_TRUE(entered);
  EXPECT_EQ((*entered)["type"], "ADDED");
  EXPECT_EQ((*entered)["object"]["metadata"]["name"], "other");
}

TEST_F(WatchProtocolTest, FieldSelectorOnName) {
  std::string rv = list_rv();
  WatchClient watch(
      server_->port(),
      "/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name%3Db&resourceVersion=" + rv);
  ASSERT_EQ(create_configmap("a").status, 201);
  ASSERT_EQ(create_configmap("b").status, 201);
  auto event = watch.next();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["object"]["metadata"]["name"], "b");
}

TEST_F(WatchProtocolTest, TimeoutSecondsEndsTheStreamCleanly) {
  WatchClient watch(server_->port(),
                    "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&resourceVersion=" + list_rv());
  EXPECT_FALSE(watch.next(std::chrono::seconds(5)));
  EXPECT_EQ(watch.ended(), WatchClient::End::kFinished);
}

TEST_F(WatchProtocolTest, DroppedWatchesBreakTheConnection) {
  WatchClient watch(server_->port(), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + list_rv());
  ASSERT_EQ(create_configmap("a").status, 201);
  ASSERT_TRUE(watch.next());
  EXPECT_EQ(server_->open_watches(), 1 + 0) << "the kubelet watches in-process, not over HTTP";
  server_->store().drop_watches();
  EXPECT_FALSE(watch.next(std::chrono::seconds(5)));
  EXPECT_EQ(watch.ended(), WatchClient::End::kBroken);
}

TEST_F(WatchProtocolTest, InjectedErrorsAndCounters) {
  Faults& faults = server_->faults();
  faults.fail_next(2, FaultMatch{"create", "configmaps"}, 429, 3);
  HttpReply throttled = create_configmap("a");
  EXPECT_EQ(throttled.status, 429);
  EXPECT_EQ(throttled.retry_after, "3");
  EXPECT_EQ(throttled.body_json()["reason"], "TooManyRequests");
  EXPECT_EQ(throttled.body_json()["details"]["retryAfterSeconds"], 3);
  EXPECT_EQ(create_configmap("a").status, 429);
  EXPECT_EQ(create_configmap("a").status, 201);
  faults.fail_next(1, FaultMatch{"*", "*"}, 500);
  HttpReply internal = http_request(server_->port(), http::verb::get, "/api/v1/namespaces/default/configmaps/a");
  EXPECT_EQ(internal.status, 500);
  EXPECT_EQ(internal.body_json()["reason"], "InternalError");
  faults.delay(std::chrono::milliseconds(300), 1, FaultMatch{"get", "configmaps"});
  auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(http_request(server_->port(), http::verb::get, "/api/v1/namespaces/default/configmaps/a").status, 200);
  // A lower bound only (load cannot break it): the injected delay held the answer back at least that long.
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(300));
  EXPECT_EQ(faults.count("create", "configmaps"), 3);
  EXPECT_EQ(faults.count("get", "configmaps"), 2);
  json stats = http_request(server_->port(), http::verb::get, "/_standin/stats").body_json();
  EXPECT_EQ(stats["byResource"]["configmaps"]["create"], 3);
  HttpReply bad = http_request(server_->port(), http::verb::post, "/_standin/faults", R"({"action":"explode"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("action"), std::string::npos);
}

TEST_F(WatchProtocolTest, DiscoveryAndOpenApiDocuments) {
  apply_crd();
  json groups = http_request(server_->port(), http::verb::get, "/apis").body_json();
  bool found = false;
  for (const json& g : groups["groups"]) found = found || g["name"] == "torus.dev";
  EXPECT_TRUE(found);
  json resources = http_request(server_->port(), http::verb::get, "/apis/torus.dev/v1").body_json();
  std::vector<std::string> names;
  for (const json& r : resources["resources"]) names.push_back(r["name"]);
  EXPECT_NE(std::find(names.begin(), names.end(), "trainingjobs/status"), names.end());
  json root = http_request(server_->port(), http::verb::get, "/openapi/v3").body_json();
  ASSERT_TRUE(root["paths"].contains("apis/torus.dev/v1"));
  std::string url = root["paths"]["apis/torus.dev/v1"]["serverRelativeURL"];
  json doc = http_request(server_->port(), http::verb::get, url).body_json();
  EXPECT_TRUE(doc["components"]["schemas"].contains("dev.torus.v1.TrainingJob"));
  EXPECT_EQ(http_request(server_->port(), http::verb::get, "/openapi/v2").status, 404);
}

}  // namespace
}  // namespace torus::standin::testing

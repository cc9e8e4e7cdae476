// operator/kube/client.cc against the in-process stand-in (plain HTTP; kube_client_tls_test.cc covers TLS and
// authentication): paths and keys, CRUD, optimistic concurrency (409 on a stale resourceVersion, status included),
// retries with backoff on 5xx/429 (Retry-After honoured) and connection failures, no retry of other 4xx, a limited
// list, and how a watch ends (cancelled, closed by the server, expired with 410) with its bookmarks.
#include "operator/kube/client.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "tests/apiserver/kubelet_sim.h"
#include "tests/operator/inprocess_standin.h"

namespace torus::kube {
namespace {

using namespace std::chrono_literals;
using test::eventually;
namespace res = resources;

TEST(KubeResource, PathsNameTheGroupVersionNamespaceAndEscapedName) {
  EXPECT_EQ(res::kPods.collection_path("ns"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(res::kPods.collection_path(""), "/api/v1/pods") << "all namespaces";
  EXPECT_EQ(res::kTrainingJobs.object_path("team a", "j"),
            "/apis/torus.dev/v1alpha1/namespaces/team%20a/trainingjobs/j");
  EXPECT_EQ(res::kNodes.object_path("ignored", "node-0"), "/api/v1/nodes/node-0") << "cluster-scoped";
  EXPECT_EQ(res::kLeases.api_version(), "coordination.k8s.io/v1");
  EXPECT_EQ(url_escape("app in (a,b)"), "app%20in%20%28a%2Cb%29");
  EXPECT_EQ(url_escape("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(object_key({{"metadata", {{"name", "p"}, {"namespace", "ns"}}}}), "ns/p");
  EXPECT_EQ(object_key({{"metadata", {{"name", "node-0"}}}}), "node-0");
}

json config_map(const std::string& name, const std::string& app = "a") {
  return {{"metadata", {{"name", name}, {"labels", {{"app", app}}}}}, {"data", {{"k", "1"}}}};
}

json pod(const std::string& name) {
  return {{"metadata", {{"name", name}}}, {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

int status_of(const std::function<void()>& call) {
  try {
    call();
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

class ClientTest : public test::InProcessStandin {
 protected:
  standin::ServerOptions server_options() const override {
    standin::ServerOptions o;
    o.store.bookmark_interval = 50ms;
    return o;
  }
  // A client that records the status of every request it puts on the wire.
  std::unique_ptr<Client> recording_client(ClientOptions options = test::fast_client_options()) {
    options.on_request = [this](const std::string& verb, int status) {
      std::lock_guard lock(mu_);
      wire_.push_back(verb + " " + std::to_string(status));
    };
    return make_client(options);
  }
  std::vector<std::string> wire() const {
    std::lock_guard lock(mu_);
    return wire_;
  }

  mutable std::mutex mu_;
  std::vector<std::string> wire_;
};

TEST_F(ClientTest, CreateGetListPatchAndRemove) {
  const json created = client_->create(res::kConfigMaps, "default", config_map("one"));
  EXPECT_EQ(created["kind"], "ConfigMap") << "kind and apiVersion come from the resource";
  EXPECT_FALSE(created["metadata"].value("resourceVersion", "").empty());
  client_->create(res::kConfigMaps, "default", config_map("two", "b"));
  EXPECT_EQ(client_->get(res::kConfigMaps, "default", "one")["data"]["k"], "1");
  EXPECT_FALSE(client_->try_get(res::kConfigMaps, "default", "missing").has_value());
  EXPECT_EQ(status_of([&] { client_->get(res::kConfigMaps, "default", "missing"); }), 404);

  const json selected = client_->list(res::kConfigMaps, "default", {.label_selector = "app in (b,c)"});
  ASSERT_EQ(selected["items"].size(), 1u) << selected.dump();
  EXPECT_EQ(selected["items"][0]["metadata"]["name"], "two");
  EXPECT_EQ(client_->list(res::kConfigMaps, "default", {.field_selector = "metadata.name=one"})["items"].size(), 1u);

  const json patched =
      client_->merge_patch(res::kConfigMaps, "default", "one", {{"data", {{"k", nullptr}, {"n", "2"}}}});
  EXPECT_EQ(patched["data"], (json{{"n", "2"}}));
  EXPECT_TRUE(client_->remove(res::kConfigMaps, "default", "one"));
  EXPECT_FALSE(client_->remove(res::kConfigMaps, "default", "one")) << "already gone is not an error";
  EXPECT_EQ(status_of([&] { client_->create(res::kConfigMaps, "default", config_map("two")); }), 409);
  try {
    client_->create(res::kConfigMaps, "default", config_map("two"));
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.already_exists());
    EXPECT_FALSE(e.conflict()) << "AlreadyExists is not a stale write";
  }
}

TEST_F(ClientTest, AStaleResourceVersionIsAConflictOnTheObjectAndOnItsStatus) {
  const json created = client_->create(res::kPods, "default", pod("p"));
  json fresh = created;
  fresh["metadata"]["labels"]["x"] = "1";
  const json updated = client_->update(res::kPods, "default", fresh);
  EXPECT_NE(updated["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);

  json stale = created;  // the resourceVersion before the update
  stale["metadata"]["labels"]["x"] = "2";
  try {
    client_->update(res::kPods, "default", stale);
    FAIL() << "expected 409";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.conflict()) << e.what();
    EXPECT_NE(std::string(e.what()).find("PUT /api/v1/namespaces/default/pods/p: 409 Conflict"), std::string::npos)
        << e.what();
  }
  stale["status"] = {{"phase", "Running"}};
  EXPECT_EQ(status_of([&] { client_->update(res::kPods, "default", stale, Subresource::kStatus); }), 409);

  json status_write = updated;
  status_write["status"]["phase"] = "Running";
  status_write["metadata"]["labels"]["x"] = "ignored";  // /status writes status only
  const json stored = client_->update(res::kPods, "default", status_write, Subresource::kStatus);
  EXPECT_EQ(stored["status"]["phase"], "Running");
  EXPECT_EQ(stored["metadata"]["labels"]["x"], "1");
  const json merged =
      client_->merge_patch(res::kPods, "default", "p", {{"status", {{"phase", "Succeeded"}}}}, Subresource::kStatus);
  EXPECT_EQ(merged["status"]["phase"], "Succeeded");
}

TEST_F(ClientTest, ServerErrorsAreRetriedAndEveryRequestIsCounted) {
  auto client = recording_client();
  client->create(res::kConfigMaps, "default", config_map("one"));
  server_->faults().fail_next(2, {"get", "configmaps"}, 500);
  const uint64_t before = client->requests_sent();
  EXPECT_EQ(client->get(res::kConfigMaps, "default", "one")["metadata"]["name"], "one");
  EXPECT_EQ(client->requests_sent() - before, 3u);
  EXPECT_EQ(wire(), (std::vector<std::string>{"POST 201", "GET 500", "GET 500", "GET 200"}));
}

TEST_F(ClientTest, RetriesStopAfterMaxRetriesWithTheLastAnswer) {
  auto client = recording_client();  // max_retries 3
  server_->faults().fail_next(10, {"list", "configmaps"}, 503);
  EXPECT_EQ(status_of([&] { client->list(res::kConfigMaps, "default"); }), 503);
  EXPECT_EQ(wire(), (std::vector<std::string>{"GET 503", "GET 503", "GET 503", "GET 503"})) << "attempts 0..3";
}

TEST_F(ClientTest, ATooManyRequestsAnswersRetryAfterIsWaitedUpToSixRetryCaps) {
  auto client = recording_client();  // retry_base 1 ms, retry_cap 10 ms
  server_->faults().fail_next(1, {"list", "configmaps"}, 429, /*retry_after_seconds=*/1);
  const auto started = std::chrono::steady_clock::now();
  client->list(res::kConfigMaps, "default");
  // Retry-After: 1 s, capped at 6 x 10 ms: longer than the 1 ms backoff the attempt would get otherwise. A lower
  // bound only (load cannot break it): the client waited at least the capped Retry-After before retrying.
  EXPECT_GE(std::chrono::steady_clock::now() - started, 60ms);
  EXPECT_EQ(wire(), (std::vector<std::string>{"GET 429", "GET 200"}));
}

TEST_F(ClientTest, OtherClientErrorsAreNotRetried) {
  auto client = recording_client();
  server_->faults().fail_next(1, {"list", "configmaps"}, 403);
  EXPECT_EQ(status_of([&] { client->list(res::kConfigMaps, "default"); }), 403);
  try {
    client->create(res::kConfigMaps, "default", config_map("Not_A_Name"));
    FAIL() << "expected 422";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_EQ(e.reason(), "Invalid");
  }
  EXPECT_EQ(wire(), (std::vector<std::string>{"GET 403", "POST 422"}));
}

TEST_F(ClientTest, AServerThatIsGoneIsAConnectionErrorAfterTheRetries) {
  auto client = recording_client();
  server_->stop();
  EXPECT_THROW(client->list(res::kConfigMaps, "default"), ConnectionError);
  EXPECT_EQ(wire(), (std::vector<std::string>{"GET 0", "GET 0", "GET 0", "GET 0"})) << "0: no answer";
}

// The operator's node permission probe reads one node, not the cluster's: `limit` reaches the server.
TEST_F(ClientTest, ListWithALimitReadsOnePage) {
  standin::KubeletSim kubelet(server_->store());  // 4 nodes
  const json page = client_->list(res::kNodes, "", {.limit = 1});
  EXPECT_EQ(page.value("items", json::array()).size(), 1u) << page.dump();
  EXPECT_FALSE(page["metadata"].value("continue", "").empty()) << page.dump();
  EXPECT_EQ(client_->list(res::kNodes, "").value("items", json::array()).size(), 4u);
}

TEST_F(ClientTest, AWatchStreamsEventsAndBookmarksUntilCancelled) {
  const std::string from = client_->list(res::kConfigMaps, "default")["metadata"]["resourceVersion"];
  std::mutex mu;
  std::vector<WatchEvent> events;
  auto seen = [&](const std::string& type) {
    std::lock_guard lock(mu);
    for (const auto& e : events) {
      if (e.type == type) return true;
    }
    return false;
  };
  StreamCancel cancel;
  WatchEnd end = WatchEnd::kClosed;
  std::thread watcher([&] {
    end = client_->watch(
        res::kConfigMaps, "default", {.label_selector = "app=a", .resource_version = from},
        [&](WatchEvent& e) {
          std::lock_guard lock(mu);
          events.push_back(e);
        },
        cancel);
  });
  client_->create(res::kConfigMaps, "default", config_map("other", "b"));  // not selected: moves the version only
  client_->create(res::kConfigMaps, "default", config_map("one"));
  EXPECT_TRUE(eventually([&] { return seen("ADDED") && seen("BOOKMARK"); }));
  cancel.cancel();
  watcher.join();
  EXPECT_EQ(end, WatchEnd::kCancelled);
  std::lock_guard lock(mu);
  ASSERT_EQ(events[0].type, "ADDED");
  EXPECT_EQ(events[0].object["metadata"]["name"], "one");
  const std::string created_at = events[0].object["metadata"]["resourceVersion"];
  for (const auto& e : events) {
    if (e.type != "BOOKMARK") continue;
    EXPECT_GE(std::stoll(e.object["metadata"].value("resourceVersion", "0")), std::stoll(created_at))
        << "a bookmark carries the stream's resourceVersion";
  }
}

TEST_F(ClientTest, AWatchEndsClosedAtItsTimeoutAndExpiredFromACompactedVersion) {
  const std::string from = client_->list(res::kConfigMaps, "default")["metadata"]["resourceVersion"];
  StreamCancel cancel;
  const auto ignore = [](WatchEvent&) {};
  EXPECT_EQ(client_->watch(res::kConfigMaps, "default", {.resource_version = from, .timeout = 1s}, ignore, cancel),
            WatchEnd::kClosed);
  client_->create(res::kConfigMaps, "default", config_map("one"));
  server_->store().compact();
  EXPECT_EQ(client_->watch(res::kConfigMaps, "default", {.resource_version = from, .timeout = 5s}, ignore, cancel),
            WatchEnd::kExpired);
  EXPECT_FALSE(cancel.cancelled()) << "a 410 ends the stream, not the caller's cancel";
}

}  // namespace
}  // namespace torus::kube

// The stand-in's cluster DNS (tests/apiserver/cluster_dns.h): a name resolves only through a headless Service that
// selects the pod and publishes it, as CoreDNS answers from the EndpointSlices; the pod's /etc/hosts holds those
// records with the forms its search list completes.
#include "tests/apiserver/cluster_dns.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/apiserver/store.h"

namespace torus::standin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ClusterDnsTest : public ::testing::Test {
 protected:
  // Pod `name` in `ns` with `labels`, hostname/subdomain when given, and its status (phase, IP, Ready) set through
  // the status subresource, as the kubelet writes it.
  void pod(const std::string& name, const json& labels, const std::string& ip, bool ready,
           const std::string& hostname = "", const std::string& subdomain = "", const std::string& ns = "default",
           const std::string& phase = "Running") {
    json spec = {{"containers", json::array({{{"name", "main"}, {"image", "busybox"}}})}};
    if (!hostname.empty()) spec["hostname"] = hostname;
    if (!subdomain.empty()) spec["subdomain"] = subdomain;
    json object = {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
                   {"spec", spec}};
    json created = *store_.create(pods_, ns, object).object;
    created["status"] = {{"phase", phase},
                         {"podIP", ip},
                         {"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}};
    store_.update(pods_, ns, name, created, Subresource::kStatus);
  }

  void service(const std::string& name, const json& selector, bool headless = true, bool publish_not_ready = false,
               const std::string& ns = "default") {
    json spec = {{"selector", selector}, {"ports", json::array({{{"port", 29500}}})}};
    if (headless) spec["clusterIP"] = "None";
    if (publish_not_ready) spec["publishNotReadyAddresses"] = true;
    store_.create(
        services_, ns,
        {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", name}, {"namespace", ns}}}, {"spec", spec}});
  }

  // The names that resolve, as "<name>.<ns> -> <ip>".
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const DnsRecord& r : cluster_dns_records(store_)) out.push_back(r.name + "." + r.ns + " -> " + r.ip);
    return out;
  }

  Store store_;
  const ResourceType& pods_ = *store_.registry().find("", "v1", "pods");
  const ResourceType& services_ = *store_.registry().find("", "v1", "services");
};

const json kWorker = {{"job", "a"}, {"role", "worker"}};

TEST_F(ClusterDnsTest, AHeadlessServiceThatSelectsAReadyPodNamesItAndItsHostname) {
  pod("a-worker-0", kWorker, "127.1.0.5", /*ready=*/true, "a-worker-0", "a");
  service("a", {{"job", "a"}});
  EXPECT_THAT(names(), ::testing::ElementsAre("a.default -> 127.1.0.5", "a-worker-0.a.default -> 127.1.0.5"));
}

TEST_F(ClusterDnsTest, NothingResolvesWithoutAServiceThatSelectsThePod) {
  pod("a-worker-0", kWorker, "127.1.0.5", true, "a-worker-0", "a");
  EXPECT_THAT(names(), ::testing::IsEmpty()) << "no Service";
  service("a", {{"job", "b"}});
  EXPECT_THAT(names(), ::testing::IsEmpty()) << "a selector that matches no pod";
  service("c", {{"job", "a"}}, /*headless=*/false);
  EXPECT_THAT(names(), ::testing::IsEmpty()) << "a ClusterIP Service: a virtual IP, no pod records";
  service("d", json::object());
  EXPECT_THAT(names(), ::testing::IsEmpty()) << "an empty selector selects nothing";
}

TEST_F(ClusterDnsTest, TheHostnameRecordNeedsTheSubdomainToBeTheServicesName) {
  pod("a-worker-0", kWorker, "127.1.0.5", true, "a-worker-0", "other");
  service("a", {{"job", "a"}});
  EXPECT_THAT(names(), ::testing::ElementsAre("a.default -> 127.1.0.5"));
}

TEST_F(ClusterDnsTest, ANotReadyPodResolvesOnlyWhereTheServicePublishesNotReadyAddresses) {
  pod("a-worker-0", kWorker, "127.1.0.5", /*ready=*/false, "a-worker-0", "a");
  service("a", {{"job", "a"}});
  EXPECT_THAT(names(), ::testing::IsEmpty());
  pod("b-worker-0", {{"job", "b"}}, "127.1.0.6", false, "b-worker-0", "b");
  service("b", {{"job", "b"}}, true, /*publish_not_ready=*/true);
  EXPECT_THAT(names(), ::testing::ElementsAre("b.default -> 127.1.0.6", "b-worker-0.b.default -> 127.1.0.6"));
}

TEST_F(ClusterDnsTest, ServicesSelectInTheirOwnNamespaceOnly) {
  store_.create(*store_.registry().find("", "v1", "namespaces"), "",
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team-b"}}}});
  pod("a-worker-0", kWorker, "127.1.0.5", true, "a-worker-0", "a", "team-b");
  service("a", {{"job", "a"}});
  EXPECT_THAT(names(), ::testing::IsEmpty());
}

// The EndpointSlice controller's ShouldPodBeInEndpoints: no IP, a terminal phase, or (unless not-ready addresses are
// published) a deletion in progress keep a pod out.
TEST(ServesEndpoint, FollowsTheEndpointSliceControllersRules) {
  const json running = {{"metadata", json::object()},
                        {"status",
                         {{"phase", "Running"},
                          {"podIP", "127.1.0.5"},
                          {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  EXPECT_TRUE(serves_endpoint(running, false));
  json no_ip = running;
  no_ip["status"].erase("podIP");
  EXPECT_FALSE(serves_endpoint(no_ip, true));
  for (const char* phase : {"Succeeded", "Failed"}) {
    json ended = running;
    ended["status"]["phase"] = phase;
    EXPECT_FALSE(serves_endpoint(ended, true)) << phase;
  }
  json deleting = running;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z";
  EXPECT_FALSE(serves_endpoint(deleting, false));
  EXPECT_TRUE(serves_endpoint(deleting, true));
  json not_ready = running;
  not_ready["status"]["conditions"][0]["status"] = "False";
  EXPECT_FALSE(serves_endpoint(not_ready, false));
  EXPECT_TRUE(serves_endpoint(not_ready, true));
}

TEST(HostsFile, HoldsThePodsOwnNameAndTheRecordsWithTheirSearchListForms) {
  const json pod = {{"metadata", {{"name", "a-worker-1"}, {"namespace", "default"}}},
                    {"spec", {{"hostname", "a-worker-1"}, {"subdomain", "a"}}},
                    {"status", {{"podIP", "127.1.0.6"}}}};
  const std::string hosts =
      hosts_file({{"default", "a-worker-0.a", "127.1.0.5"}, {"team-b", "b-worker-0.b", "127.1.0.9"}}, pod);
  EXPECT_THAT(hosts, HasSubstr("127.0.0.1\tlocalhost\n"));
  EXPECT_THAT(hosts, HasSubstr("127.1.0.6\ta-worker-1.a.default.svc.cluster.local\ta-worker-1\n"));
  EXPECT_THAT(hosts, HasSubstr("127.1.0.5\ta-worker-0.a.default.svc.cluster.local a-worker-0.a.default.svc "
                               "a-worker-0.a.default a-worker-0.a\n"));
  // Another namespace's short name is not completed by this pod's search list.
  EXPECT_THAT(hosts, HasSubstr("127.1.0.9\tb-worker-0.b.team-b.svc.cluster.local b-worker-0.b.team-b.svc "
                               "b-worker-0.b.team-b\n"));
  EXPECT_THAT(hosts, Not(HasSubstr(" b-worker-0.b\n")));
}

TEST(PodHostname, IsSpecHostnameElseTheNameTruncatedTo63) {
  EXPECT_EQ(pod_hostname({{"metadata", {{"name", "p"}}}, {"spec", {{"hostname", "h"}}}}), "h");
  EXPECT_EQ(pod_hostname({{"metadata", {{"name", std::string(70, 'x')}}}, {"spec", json::object()}}),
            std::string(63, 'x'));
}

}  // namespace
}  // namespace torus::standin

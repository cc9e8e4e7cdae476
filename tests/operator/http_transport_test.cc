// The operator's HTTP transport under the loopback-only policy every test runs with: a server outside loopback
// (a pod IP in 10.244.x.y, a node in 192.168.x.y) is refused before any socket is opened.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/util/destination.h"
#include "operator/kube/transport.h"

namespace torus::kube {
namespace {

using ::testing::HasSubstr;

TEST(HttpTransport, RefusesServersOutsideLoopback) {
  ASSERT_EQ(net::destination_policy(), net::DestinationPolicy::kLoopbackOnly);
  for (const char* server : {"http://10.244.0.5:9090", "https://192.168.0.10:6443", "http://[fe80::1]:80"}) {
    ClusterConfig target;
    target.server = server;
    try {
      make_http_transport(target, {});
      ADD_FAILURE() << server << " was allowed";
    } catch (const net::DestinationRefused& e) {
      EXPECT_THAT(e.what(), HasSubstr(server));
      EXPECT_THAT(e.what(), HasSubstr("refusing to connect"));
    }
  }
}

TEST(HttpTransport, AllowsLoopbackServers) {
  for (const char* server : {"http://127.0.0.1:1", "http://127.2.0.7:9090", "https://localhost:6443", "http://[::1]:80"}) {
    ClusterConfig target;
    target.server = server;
    EXPECT_NO_THROW(make_http_transport(target, {})) << server;
  }
}

}  // namespace
}  // namespace torus::kube
